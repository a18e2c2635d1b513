"""Rates and their samples in /api/overview, /api/queues and /api/connections
(RabbitMQ's `msg_rates_age` / `lengths_age`), on a real single-node broker whose
clock is a ManualClock: the test takes each sampling round itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.http.api_context import ApiContext, Listeners
from api.http.app import create_app
from logbroker.broker import Broker
from logbroker.broker_config import BrokerConfig
from logbroker.rate_sampling import sampled
from segments.clock import ManualClock

T0 = 1_700_000_000_000  # a multiple of 5 s: the samples fall on the grid
HISTORY = "msg_rates_age=10&msg_rates_incr=5&lengths_age=10&lengths_incr=5"


@dataclass
class Api:
    broker: Broker
    clock: ManualClock
    http: httpx.AsyncClient

    def sample(self) -> None:
        self.broker.rates.sample(self.clock.wall_ms(), sampled(self.broker))

    async def json(self, path: str) -> Any:
        answer = await self.http.get(path)
        assert answer.status_code == 200, answer.text
        return answer.json()


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    clock = ManualClock(wall_ms=T0)
    broker = Broker.open(BrokerConfig(data_dir=str(tmp_path), node_name="n1"), clock=clock)
    context = ApiContext(broker, Listeners(5672, 15672, "127.0.0.1"), clock=clock)
    transport = httpx.ASGITransport(app=create_app(context))
    async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                 auth=("guest", "guest")) as http:
        yield Api(broker, clock, http)
    await broker.close()


async def publish_and_get(api: Api, published: int, taken: int) -> None:
    assert (await api.http.put("/api/queues/%2F/q", json={})).status_code in (201, 204)
    for i in range(published):
        answer = await api.http.post("/api/exchanges/%2F/amq.default/publish", json={
            "routing_key": "q", "payload": f"m{i}", "payload_encoding": "string",
            "properties": {}})
        assert answer.json()["routed"] is True, answer.text
    if taken:
        answer = await api.http.post("/api/queues/%2F/q/get", json={
            "count": taken, "ackmode": "ack_requeue_false"})
        assert len(answer.json()) == taken


async def three_rounds(api: Api) -> None:
    """Samples at T0 (nothing yet), T0+5 s (10 published), T0+10 s (4 of them taken)."""
    assert (await api.http.put("/api/queues/%2F/q", json={})).status_code in (201, 204)
    api.sample()
    api.clock.advance(5000)
    await publish_and_get(api, 10, 0)
    api.sample()
    api.clock.advance(5000)
    await publish_and_get(api, 0, 4)
    api.sample()


def samples(details: dict[str, Any]) -> list[tuple[int, int]]:
    return [(s["sample"], s["timestamp"] - T0) for s in details["samples"]]


async def test_overview_has_rates_and_asked_samples(api: Api) -> None:
    await three_rounds(api)
    overview = await api.json(f"/api/overview?{HISTORY}")
    stats, totals = overview["message_stats"], overview["queue_totals"]
    assert stats["publish"] == 10 and stats["deliver_get"] == stats["get"] == 4
    assert stats["deliver"] == 0
    assert samples(stats["publish_details"]) == [(10, 10_000), (10, 5000), (0, 0)]
    assert stats["publish_details"]["avg_rate"] == 1.0  # 10 messages over 10 s
    assert stats["publish_details"]["rate"] == 1.0
    assert samples(stats["get_details"]) == [(4, 10_000), (0, 5000), (0, 0)]
    assert {"confirm", "return_unroutable", "redeliver", "ack"} <= set(stats)
    assert (totals["messages"], totals["messages_ready"]) == (6, 6)
    assert samples(totals["messages_details"]) == [(6, 10_000), (10, 5000), (0, 0)]
    assert totals["messages_details"]["avg"] == round(16 / 3, 2)
    assert overview["queues_unknown"] == 0


async def test_without_the_parameters_details_have_the_rate_only(api: Api) -> None:
    await three_rounds(api)
    overview = await api.json("/api/overview")
    assert overview["message_stats"]["publish_details"] == {"rate": 1.0}
    assert set(overview["queue_totals"]["messages_ready_details"]) == {"rate"}
    [listed] = await api.json("/api/queues")
    assert listed["message_stats"]["publish_details"] == {"rate": 1.0}
    assert listed["messages_ready_details"] == {"rate": 0.6}  # 0 -> 6 over 10 s


async def test_a_queue_has_its_own_samples(api: Api) -> None:
    await three_rounds(api)
    view = await api.json("/api/queues/%2F/q?msg_rates_age=5&msg_rates_incr=5")
    assert samples(view["message_stats"]["publish_details"]) == [(10, 10_000), (10, 5000)]
    assert view["message_stats"]["publish_details"]["avg_rate"] == 0.0
    assert set(view["messages_details"]) == {"rate"}  # lengths not asked
    assert (view["messages_ready"], view["messages_unacknowledged"]) == (6, 0)
    assert view["leader"] == view["node"] == "n1" and view["followers"] == []


async def test_an_age_beyond_the_history_gives_the_samples_there_are(api: Api) -> None:
    await three_rounds(api)
    view = await api.json("/api/queues/%2F/q?lengths_age=600&lengths_incr=5")
    assert len(view["messages_details"]["samples"]) == 3


@pytest.mark.parametrize("query, key", [
    ("msg_rates_age=60", "msg_rates_incr"),
    ("lengths_incr=5", "lengths_age"),
    ("msg_rates_age=60&msg_rates_incr=0", "msg_rates_incr"),
    ("data_rates_age=-1&data_rates_incr=5", "data_rates_age"),
    ("msg_rates_age=86400&msg_rates_incr=1", "msg_rates_incr"),
])
async def test_bad_history_parameters_are_refused_by_name(api: Api, query: str, key: str
                                                          ) -> None:
    for path in ("/api/overview", "/api/queues", "/api/connections"):
        answer = await api.http.get(f"{path}?{query}")
        assert answer.status_code == 400, answer.text
        assert key in answer.json()["reason"]


async def test_a_deleted_queue_is_forgotten_by_the_sampler(api: Api) -> None:
    await three_rounds(api)
    before = len(api.broker.rates)
    assert (await api.http.delete("/api/queues/%2F/q")).status_code == 204
    api.clock.advance(5000)
    api.sample()
    assert len(api.broker.rates) == before - 1


async def test_exchanges_count_messages_in_and_routed_out(api: Api) -> None:
    await three_rounds(api)
    answer = await api.http.post("/api/exchanges/%2F/amq.default/publish", json={
        "routing_key": "nowhere", "payload": "x", "payload_encoding": "string",
        "properties": {}})
    assert answer.json()["routed"] is False
    view = await api.json("/api/exchanges/%2F/amq.default?msg_rates_age=10&msg_rates_incr=5")
    stats = view["message_stats"]
    assert (stats["publish_in"], stats["publish_out"]) == (11, 10)
    assert samples(stats["publish_in_details"]) == [(10, 10_000), (10, 5000)]
    listed = {x["name"]: x for x in await api.json("/api/exchanges")}
    # first sampled at T0+5 s with its 10: no growth since
    assert listed[""]["message_stats"]["publish_in_details"] == {"rate": 0.0}
    assert listed["amq.topic"]["message_stats"]["publish_in"] == 0


async def test_a_user_of_one_vhost_gets_the_counts_of_its_queues(api: Api) -> None:
    await three_rounds(api)
    for path, body in (("/api/vhosts/other", {}),
                       ("/api/users/bob", {"password": "pw", "tags": "management"}),
                       ("/api/permissions/other/bob",
                        {"configure": ".*", "write": ".*", "read": ".*"})):
        assert (await api.http.put(path, json=body)).status_code in (201, 204)
    answer = await api.http.get("/api/overview", auth=("bob", "pw"))
    stats = answer.json()["message_stats"]
    assert stats["publish"] == 0 and "confirm" not in stats
    assert answer.json()["queue_totals"]["messages"] == 0


async def test_deleting_a_queue_does_not_lower_the_overview_totals(api: Api) -> None:
    """Deliveries and acks are node-level counts, as RabbitMQ's: a queue's go on
    counting in the overview once it is gone, and so do their samples."""
    await three_rounds(api)
    answer = await api.http.post("/api/queues/%2F/q/get", json={
        "count": 2, "ackmode": "ack_requeue_true"})  # handed out, then requeued
    assert len(answer.json()) == 2
    answer = await api.http.post("/api/queues/%2F/q/get", json={
        "count": 1, "ackmode": "ack_requeue_false"})
    assert answer.json()[0]["redelivered"] is True
    [shell] = api.broker.all_queues()
    taken = shell.get("a-channel", no_ack=False)  # the other one requeued, acked after
    assert taken is not None
    shell.ack([taken[0]])
    before = (await api.json("/api/overview"))["message_stats"]
    counts = {k: before[k] for k in ("publish", "deliver_get", "get", "deliver", "redeliver",
                                     "ack")}
    assert counts == {"publish": 10, "deliver_get": 8, "get": 8, "deliver": 0,
                      "redeliver": 2, "ack": 1}
    assert (await api.http.delete("/api/queues/%2F/q")).status_code == 204
    api.clock.advance(5000)
    api.sample()
    overview = await api.json(f"/api/overview?{HISTORY}")
    stats = overview["message_stats"]
    assert {k: stats[k] for k in counts} == counts
    assert samples(stats["get_details"])[0] == (8, 15_000)
    assert overview["object_totals"]["queues"] == 0
