"""Consumer groups over HTTP against a running broker: commit, read back with lag, list,
delete, permissions, 404s and 400s; and a replay page past the end of the log.

Also the Python client's consumer-group calls (sync and async), and that the
groups survive a restart of the node (the metadata log).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from api.client import AsyncClient, Client, NotFound
from api.client.errors import BadRequest
from tests.integration.conftest import BrokerProcess, start_broker


def ok(response: httpx.Response, *statuses: int) -> httpx.Response:
    assert response.status_code in (statuses or (200,)), (response.status_code, response.text)
    return response


def declare(http: httpx.Client, name: str, vhost: str = "%2F") -> None:
    ok(http.put(f"/api/queues/{vhost}/{name}", json={}), 201, 204)


def publish(http: httpx.Client, queue: str, count: int) -> None:
    messages = [{"routing_key": queue, "payload": f"m{i}"} for i in range(count)]
    ok(http.post("/api/exchanges/%2F/amq.default/publish-batch", json={"messages": messages}))


def group(http: httpx.Client, name: str, vhost: str = "%2F") -> dict[str, Any]:
    view: dict[str, Any] = ok(http.get(f"/api/consumer-groups/{vhost}/{name}")).json()
    return view


def test_commit_merges_and_reads_back_with_lag(http: httpx.Client) -> None:
    declare(http, "cg-a")
    declare(http, "cg-b")
    publish(http, "cg-a", 10)
    publish(http, "cg-b", 3)
    ok(http.put("/api/consumer-groups/%2F/spark-1", json={"offsets": {"cg-a": 4}}), 204)
    ok(http.put("/api/consumer-groups/%2F/spark-1", json={"offsets": {"cg-b": 1}}), 204)
    view = group(http, "spark-1")
    assert view == {"vhost": "/", "name": "spark-1", "lag": 8, "queues": [
        {"queue": "cg-a", "committed_offset": 4, "first_offset": 0, "end_offset": 10, "lag": 6},
        {"queue": "cg-b", "committed_offset": 1, "first_offset": 0, "end_offset": 3, "lag": 2},
    ]}
    # A lower offset is a reset; an offset past the end has no lag (never negative).
    ok(http.put("/api/consumer-groups/%2F/spark-1", json={"offsets": {"cg-a": 0, "cg-b": 9}}),
       204)
    queues = {q["queue"]: q for q in group(http, "spark-1")["queues"]}
    assert (queues["cg-a"]["lag"], queues["cg-b"]["lag"]) == (10, 0)
    listed = ok(http.get("/api/consumer-groups/%2F")).json()
    assert "spark-1" in [g["name"] for g in listed]
    assert "spark-1" in [g["name"] for g in ok(http.get("/api/consumer-groups")).json()]


def test_deleting_a_queue_drops_it_from_the_group_and_delete_forgets_the_group(
        http: httpx.Client) -> None:
    declare(http, "cg-gone")
    declare(http, "cg-kept")
    ok(http.put("/api/consumer-groups/%2F/g-del",
                json={"offsets": {"cg-gone": 1, "cg-kept": 2}}), 204)
    ok(http.delete("/api/queues/%2F/cg-gone"), 204)
    assert [q["queue"] for q in group(http, "g-del")["queues"]] == ["cg-kept"]
    ok(http.delete("/api/consumer-groups/%2F/g-del"), 204)
    missing = http.get("/api/consumer-groups/%2F/g-del")
    assert missing.status_code == 404
    assert missing.json()["error"] == "not_found"
    assert http.delete("/api/consumer-groups/%2F/g-del").status_code == 404


@pytest.mark.parametrize(("body", "field"), [
    ({"offsets": {"cg-bad": -1}}, "offsets.cg-bad"),
    ({"offsets": {"cg-bad": "10"}}, "offsets.cg-bad"),
    ({"offsets": {"cg-bad": 1.5}}, "offsets.cg-bad"),
    ({"offsets": {"cg-bad": True}}, "offsets.cg-bad"),
    ({"offsets": {"cg-bad": 2**63}}, "offsets.cg-bad"),
    ({"offsets": [1]}, "offsets"),
    ({}, "offsets"),
    ([], "body"),
])  # fmt: skip
def test_bad_bodies_answer_400_naming_the_field(http: httpx.Client, body: Any,
                                                field: str) -> None:
    declare(http, "cg-bad")
    answer = http.put("/api/consumer-groups/%2F/g-bad", json=body)
    assert answer.status_code == 400, answer.text
    assert (answer.json()["error"], answer.json()["field"]) == ("bad_request", field)
    assert http.get("/api/consumer-groups/%2F/g-bad").status_code == 404  # nothing created


def test_unknown_things_answer_404_and_bad_names_400(http: httpx.Client) -> None:
    unknown_queue = http.put("/api/consumer-groups/%2F/g-404", json={"offsets": {"nope": 1}})
    assert unknown_queue.status_code == 404
    assert "nope" in unknown_queue.json()["reason"]
    assert http.put("/api/consumer-groups/no-vhost/g", json={"offsets": {}}).status_code == 404
    assert http.get("/api/consumer-groups/no-vhost").status_code == 404
    long_name = "g" * 256
    answer = http.put(f"/api/consumer-groups/%2F/{long_name}", json={"offsets": {}})
    assert (answer.status_code, answer.json()["field"]) == (400, "group")
    ok(http.put(f"/api/consumer-groups/%2F/{long_name[:255]}", json={"offsets": {}}), 204)


def test_permissions_are_checked_per_queue(broker: BrokerProcess, http: httpx.Client) -> None:
    declare(http, "cg-open")
    declare(http, "cg-secret")
    ok(http.put("/api/users/cg-reader", json={"password": "pw", "tags": ""}), 201, 204)
    ok(http.put("/api/permissions/%2F/cg-reader",
                json={"configure": "", "write": "", "read": "^cg-open$"}), 201, 204)
    ok(http.put("/api/users/cg-stranger", json={"password": "pw", "tags": ""}), 201, 204)
    with httpx.Client(base_url=broker.url, auth=("cg-reader", "pw"), timeout=10) as reader:
        ok(reader.put("/api/consumer-groups/%2F/g-perm", json={"offsets": {"cg-open": 1}}), 204)
        refused = reader.put("/api/consumer-groups/%2F/g-perm",
                             json={"offsets": {"cg-open": 2, "cg-secret": 1}})
        assert (refused.status_code, refused.json()["error"]) == (403, "access_refused")
        assert group(reader, "g-perm")["queues"][0]["committed_offset"] == 1  # unchanged
        ok(http.put("/api/consumer-groups/%2F/g-perm", json={"offsets": {"cg-secret": 1}}), 204)
        assert reader.delete("/api/consumer-groups/%2F/g-perm").status_code == 403
    with httpx.Client(base_url=broker.url, auth=("cg-stranger", "pw"), timeout=10) as stranger:
        assert stranger.get("/api/consumer-groups/%2F/g-perm").status_code == 403
        assert stranger.get("/api/consumer-groups/%2F").status_code == 403
        assert ok(stranger.get("/api/consumer-groups")).json() == []
    assert httpx.get(f"{broker.url}/api/consumer-groups").status_code == 401


def test_a_replay_page_past_the_end_stops_at_the_end(http: httpx.Client) -> None:
    declare(http, "cg-replay")
    publish(http, "cg-replay", 3)
    page = ok(http.get("/api/queues/%2F/cg-replay/messages",
                       params={"from_offset": 100})).json()
    assert (page["messages"], page["next_offset"], page["end_offset"]) == ([], 3, 3)
    raw = ok(http.get("/api/queues/%2F/cg-replay/messages",
                      params={"from_offset": 100, "format": "batches"}))
    assert (raw.headers["X-Next-Offset"], raw.headers["X-End-Offset"]) == ("3", "3")
    later = ok(http.get("/api/queues/%2F/cg-replay/messages",
                        params={"from_timestamp": 2**62})).json()
    assert (later["next_offset"], later["end_offset"]) == (3, 3)


def test_the_clients_commit_read_list_and_delete(broker: BrokerProcess,
                                                 http: httpx.Client) -> None:
    declare(http, "cg-client")
    publish(http, "cg-client", 5)
    with Client(broker.url) as client:
        client.commit_group_offsets("c-sync", {"cg-client": 2})
        view = client.consumer_group("c-sync")
        assert (view["lag"], view["queues"][0]["end_offset"]) == (3, 5)
        assert "c-sync" in [g["name"] for g in client.list_consumer_groups()]
        assert "c-sync" in [g["name"] for g in client.list_consumer_groups(all_vhosts=True)]
        with pytest.raises(BadRequest):
            client.commit_group_offsets("c-sync", {"cg-client": -1})
        client.delete_consumer_group("c-sync")
        with pytest.raises(NotFound):
            client.consumer_group("c-sync")

    async def run() -> None:
        async with AsyncClient(broker.url) as client:
            await client.commit_group_offsets("c-async", {"cg-client": 4}, vhost="/")
            view = await client.consumer_group("c-async")
            assert view["queues"][0]["lag"] == 1
            assert "c-async" in [g["name"] for g in await client.list_consumer_groups()]
            await client.delete_consumer_group("c-async")
            with pytest.raises(NotFound):
                await client.consumer_group("c-async")
    asyncio.run(run())


def test_groups_survive_a_restart(tmp_path_factory: pytest.TempPathFactory) -> None:
    data = tmp_path_factory.mktemp("groups-restart") / "data"
    first = start_broker(data)
    try:
        with Client(first.url) as client:
            client.declare_queue("cg-durable")
            client.commit_group_offsets("kept", {"cg-durable": 7})
    finally:
        first.stop()
    second = start_broker(data)
    try:
        with Client(second.url) as client:
            view = client.consumer_group("kept")
            assert view["queues"][0]["committed_offset"] == 7
    finally:
        second.stop()
