"""Publisher flow across nodes: a queue's hold reaches publishers on other nodes.

Three nodes in one process, as in test_cluster_nodes.py (whose `cluster` fixture this uses).
"""

import asyncio

import pytest

from logbroker.cluster.cluster_node import ClusterNode
from logbroker.queue.publisher_flow import FlowLimits, PublisherFlow
from logbroker.queue.queue_shell import QueueShell
from tests.unit.logbroker.cluster.test_cluster_nodes import (
    CLIENT_LOCAL,
    RecordingSink,
    persistent,
    session,
    shell_of,
    wait_for,
)
from tests.unit.logbroker.cluster.test_cluster_nodes import cluster as cluster  # the fixture

pytestmark = pytest.mark.timeout(30)

# No stall or maximum ends a hold here: only the consumers can.
LIMITS = FlowLimits(high=3, low=1, open_min_ms=0, stall_ms=60_000, trial_hold_max_ms=60_000)


async def _held_queue_on_a(cluster: dict[str, ClusterNode], name: str,
                            slow_consumer: bool = True) -> QueueShell:
    """Queue `name` led by a, with LIMITS, known on b; with a consumer on a that has no
    credit (`slow_consumer`), so every message stays ready."""
    a, b = cluster["a"], cluster["b"]
    await a.broker.definitions.declare_queue(session(a), name, arguments=CLIENT_LOCAL)
    await wait_for(lambda: b.metadata.state.queue("/", name) is not None, "the queue on b")
    shell = shell_of(a, name)
    shell.flow_gate.flow = PublisherFlow(LIMITS)
    if slow_consumer:
        sink = RecordingSink("conn-a:1")
        sink.credit = lambda: 0  # type: ignore[method-assign]
        await a.broker.consuming.consume(session(a), name, sink, consumer_tag="slow")
    return shell


async def _publish_until_held(node: ClusterNode, queue: str, publisher_id: str,
                              rounds: int = 40) -> list[asyncio.Future[None]]:
    """Publish one message at a time from `node` until a hold comes back (or `rounds`)."""
    holds: list[asyncio.Future[None]] = []
    for _ in range(rounds):
        message = persistent(b"m")
        message.routing_key = queue
        results = await node.broker.publisher.start_batch("/", [message], holds, publisher_id)
        assert results[0].confirmed
        if holds:
            break
        await asyncio.sleep(0.01)  # the leader's q.flow notice needs a turn of the link
    return holds


async def test_a_held_queue_holds_publishers_on_other_nodes_until_it_lets_go(
    cluster: dict[str, ClusterNode],
) -> None:
    a, b = cluster["a"], cluster["b"]
    shell = await _held_queue_on_a(cluster, "held")
    holds = await _publish_until_held(b, "held", "conn-x")
    assert len(holds) == 1 and not holds[0].done()
    assert shell.flow_gate.flow.holding
    a.broker.consuming.channel_closed("/", "conn-a:1", {"held"})  # no consumer: let go
    await asyncio.wait_for(holds[0], 5.0)
    assert not shell.flow_gate.flow.holding


async def test_a_publisher_that_consumes_from_the_queue_is_not_held_from_another_node(
    cluster: dict[str, ClusterNode],
) -> None:
    b = cluster["b"]
    shell = await _held_queue_on_a(cluster, "own", slow_consumer=False)
    # conn-b consumes through b, one unacked at a time, and never acks.
    await b.broker.consuming.consume(session(b), "own", RecordingSink("conn-b:1"),
                            consumer_tag="own", prefetch_count=1)
    await wait_for(lambda: shell.core.consumer_count == 1, "the forwarded consumer on a")
    assert await _publish_until_held(b, "own", "conn-b", rounds=15) == []
    assert shell.flow_gate.flow.holding  # a holds: other publishers through b would wait
    holds = await _publish_until_held(b, "own", "conn-y")
    assert len(holds) == 1 and not holds[0].done()


async def test_a_broken_link_releases_the_holds_of_that_node(
    cluster: dict[str, ClusterNode],
) -> None:
    b = cluster["b"]
    await _held_queue_on_a(cluster, "cut")
    holds = await _publish_until_held(b, "cut", "conn-x")
    assert holds
    b.remote_queues.peer_down("a")
    assert holds[0].done()
