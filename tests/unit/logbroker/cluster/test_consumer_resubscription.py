"""Consumers follow a replicated queue's leader when it moves (consumer_resubscription.py).

Three nodes in one process, as in test_cluster_nodes.py (whose `cluster` fixture this
uses). A sink here does what the AMQP channel and the WebSocket do: it keeps its
consumers in a table that `ConsumerMoves` updates.
"""

from dataclasses import dataclass, field

import pytest

from logbroker.cluster.cluster_node import ClusterNode
from logbroker.consumer_resubscription import ConsumeRequest, ConsumerMoves, SinkConsumer
from logbroker.message import Message
from tests.unit.logbroker.cluster.test_cluster_nodes import cluster as cluster  # the fixture
from tests.unit.logbroker.cluster.test_cluster_nodes import (
    persistent,
    publish,
    session,
    wait_for,
)

pytestmark = pytest.mark.timeout(30)
REPLICATED = {"x-queue-replicas": 3, "x-queue-leader-locator": "client-local"}


@dataclass
class FollowingSink:
    """Acks every delivery on the endpoint its consumer holds, as a client would."""

    node: ClusterNode
    channel_key: str
    consumers: dict[str, SinkConsumer] = field(default_factory=dict)
    bodies: dict[str, list[bytes]] = field(default_factory=dict)
    cancelled: list[str] = field(default_factory=list)
    moves: ConsumerMoves = field(init=False)

    def __post_init__(self) -> None:
        self.moves = ConsumerMoves(self.node.broker, session(self.node), self, self.consumers,
                                   lambda: False, self.cancelled.append)

    async def consume(self, queue: str, tag: str, **arguments: object) -> None:
        _, endpoint = await self.node.broker.consuming.consume(
            session(self.node), queue, self, consumer_tag=tag,
            prefetch_count=10, arguments=arguments)
        self.consumers[tag] = SinkConsumer(endpoint, ConsumeRequest(
            queue, tag, prefetch_count=10, arguments=arguments))
        endpoint.schedule_pump()

    def deliver(self, queue: str, consumer_tag: str | None, offset: int, redelivered: bool,
                message: Message) -> None:
        assert consumer_tag is not None
        self.bodies.setdefault(consumer_tag, []).append(message.body)
        self.consumers[consumer_tag].endpoint.ack([offset])

    def consumer_cancelled(self, queue: str, consumer_tag: str,
                           leader_moved: bool = False) -> None:
        self.moves.consumer_gone(consumer_tag, leader_moved)

    def credit(self) -> int | None:
        return None


async def replicated_queue_on_a(cluster: dict[str, ClusterNode], name: str) -> None:
    a = cluster["a"]
    await a.broker.definitions.declare_queue(session(a), name, durable=True,
                                    arguments=REPLICATED)

    def in_sync_everywhere() -> bool:
        records = [node.metadata.state.queue("/", name) for node in cluster.values()]
        return all(r is not None and r.leader_node == "a" and sorted(r.in_sync) == ["a", "b", "c"]
                   for r in records)
    await wait_for(in_sync_everywhere, "the queue led by a with every replica in sync")


async def test_consumers_follow_a_handover_unless_they_asked_to_be_cancelled(
    cluster: dict[str, ClusterNode],
) -> None:
    a, b, c = cluster["a"], cluster["b"], cluster["c"]
    await replicated_queue_on_a(cluster, "moving")
    local = FollowingSink(a, "conn-a:1")  # on the leader itself
    remote = FollowingSink(b, "conn-b:1")  # forwarded to the leader
    await local.consume("moving", "on-a")
    await remote.consume("moving", "on-b")
    await remote.consume("moving", "told", **{"x-cancel-on-ha-failover": True})
    before = [b"before-%d" % i for i in range(9)]
    for body in before:
        assert await publish(a.broker, "moving", persistent(body))
    await wait_for(lambda: sum(map(len, [*local.bodies.values(), *remote.bodies.values()]))
                   == len(before), "every message delivered before the move")

    assert await a.handover.transfer("/", "moving", "c") == "c"

    await wait_for(lambda: remote.cancelled == ["told"], "basic.cancel for 'told' only")
    await wait_for(lambda: c.broker.queue("/", "moving") is not None
                   and c.broker.queue("/", "moving").core.consumer_count == 2,  # type: ignore
                   "both other consumers registered with c")
    assert local.cancelled == [] and set(local.consumers) == {"on-a"}
    assert set(remote.consumers) == {"on-b"}
    after = [b"after-%d" % i for i in range(20)]
    for body in after:
        assert await publish(b.broker, "moving", persistent(body))

    def followed(tag: str) -> list[bytes]:
        return (local.bodies if tag == "on-a" else remote.bodies).get(tag, [])
    await wait_for(lambda: set(after) <= set(followed("on-a") + followed("on-b")),
                   "the messages published after the move delivered to the followers")
    # Both followers take turns on c; nothing reaches the cancelled consumer any more.
    assert set(after) & set(followed("on-a")) and set(after) & set(followed("on-b"))
    assert not set(after) & set(remote.bodies.get("told", []))
    assert set(followed("on-a") + followed("on-b")) <= set(before + after)


async def test_a_consumer_whose_queue_is_deleted_is_cancelled(
    cluster: dict[str, ClusterNode],
) -> None:
    a, b = cluster["a"], cluster["b"]
    await replicated_queue_on_a(cluster, "going")
    remote = FollowingSink(b, "conn-b:2")
    await remote.consume("going", "gone")
    await a.broker.definitions.delete_queue(session(a), "going")
    await wait_for(lambda: remote.cancelled == ["gone"], "basic.cancel after the delete")
    assert remote.consumers == {}
