"""`cluster_figures`: one request per other node (per few thousand queues), a node that
fails or is silent shown unknown, exchanges' counts added up over the nodes, on a fake
broker and a fake cluster link."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from logbroker.broker import Broker
from logbroker.errors import BrokerError
from logbroker.message_stats import MessageStats
from logbroker.queue_figures import (
    FIGURES_TIMEOUT_S,
    MAX_ASKED_WITH_SAMPLES,
    cluster_figures,
)
from logbroker.rate_samples import RateSampler


class FakeLink:
    """`RemoteQueues.figures`: each node answers every queue it is asked about with
    ready = the queue's number; "n3" is unreachable."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int, float]] = []

    async def figures(self, node: str, request: dict[str, Any], timeout_s: float
                      ) -> dict[str, Any]:
        self.asked.append((node, len(request["queues"]), timeout_s))
        if node == "n3":
            raise BrokerError(541, "cluster node n3 is not reachable")
        exchanges = [{"n": {"publish_in": 2, "publish_out": 1}, "rt": {"publish_in": 0.5},
                      "p": [[5000, {"publish_in": 2}]]} for _ in request.get("exchanges", ())]
        return {"x": exchanges, "queues": [{"r": int(name[1:]), "u": 1, "c": 0, "f": 0, "e": 9,
                            "n": {"publish": 9}, "rt": {"publish": 0.5}, "l": {"n1": 2},
                            "p": [[5000, {"publish": 9}]], "b": 4096, "s": 1}
                           for _, name in request["queues"]],
                "node": {"n": {"publish": 3}, "mem": True}}


def fake_broker(leaders: dict[str, str], up: list[str]) -> tuple[Broker, FakeLink]:
    link = FakeLink()
    records = {name: SimpleNamespace(leader_node=node) for name, node in leaders.items()}
    state = SimpleNamespace(
        queue=lambda _vhost, name: records.get(name),
        cluster_nodes=lambda: [SimpleNamespace(name=n, up=True) for n in up])
    broker = SimpleNamespace(
        config=SimpleNamespace(node_name="n1"), state=state, remote=link,
        queue=lambda _vhost, _name: None, replay_view=lambda _vhost, _name: None,
        rates=RateSampler(), publisher=SimpleNamespace(stats=MessageStats()),
        resources=SimpleNamespace(alarms=SimpleNamespace(active=set())))
    return cast(Broker, broker), link


async def test_one_request_per_node_and_an_unreachable_node_is_unknown() -> None:
    leaders = {f"q{i}": "n2" for i in range(450)} | {"q900": "n3"}
    broker, link = fake_broker(leaders, ["n1", "n2", "n3", "n4"])
    found = await cluster_figures(broker, [("/", name) for name in leaders], every_node=True)
    assert sorted(link.asked) == [("n2", 450, FIGURES_TIMEOUT_S), ("n3", 1, FIGURES_TIMEOUT_S),
                                  ("n4", 0, FIGURES_TIMEOUT_S)]
    q7 = found.queues[("/", "q7")]
    assert (q7.messages_ready, q7.messages_unacknowledged, q7.next_offset) == (7, 1, 9)
    assert q7.follower_lags == {"n1": 2} and q7.rates == {"publish": 0.5}
    assert (q7.log_bytes, q7.log_segments) == (4096, 1)  # the leader's log, told
    unknown = found.queues[("/", "q900")]
    assert not unknown.leader_reachable and unknown.messages_unacknowledged is None
    assert unknown.log_bytes is None
    assert found.nodes["n3"] is None
    n2 = found.nodes["n2"]
    assert n2 is not None and n2.mem_alarm and n2.counters == {"publish": 3}
    assert set(found.nodes) == {"n1", "n2", "n3", "n4"}


async def test_samples_are_asked_for_a_few_hundred_queues_at_a_time() -> None:
    leaders = {f"q{i}": "n2" for i in range(450)}
    broker, link = fake_broker(leaders, ["n1", "n2"])
    found = await cluster_figures(broker, [("/", name) for name in leaders], grid=[5000, 0])
    assert [size for _, size, _ in link.asked] == [MAX_ASKED_WITH_SAMPLES,
                                                   MAX_ASKED_WITH_SAMPLES, 50]
    assert found.queues[("/", "q449")].points == [(5000, {"publish": 9})]
    assert len(found.queues) == 450


async def test_a_queue_without_a_leader_is_unknown_without_asking() -> None:
    broker, link = fake_broker({"orphan": None}, ["n1"])  # type: ignore[dict-item]
    found = await cluster_figures(broker, [("/", "orphan")])
    assert link.asked == [] and not found.queues[("/", "orphan")].leader_reachable


async def test_exchanges_add_up_what_every_node_that_answered_counted() -> None:
    broker, link = fake_broker({}, ["n1", "n2", "n3", "n4"])
    broker.publisher.stats.routed("/", "x", to_queues=True)  # one publish taken here
    keys = [("/", "x"), ("/", "y")]
    found = await cluster_figures(broker, [], grid=[5000], exchanges=keys)
    assert sorted(node for node, _, _ in link.asked) == ["n2", "n3", "n4"]
    x = found.exchanges[("/", "x")]
    assert x.counters == {"publish_in": 5, "publish_out": 3}  # 1 here + 2 from n2 and n4
    assert x.rates == {"publish_in": 1.0} and x.points == [(5000, {"publish_in": 4})]
    assert found.exchanges[("/", "y")].counters == {"publish_in": 4, "publish_out": 2}
