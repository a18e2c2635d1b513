"""Forwarded consumes between `ClusterNode`s: the leader's lookahead, the client node's
buffer, what goes back to the leader, and flow control (see forwarded_consumers.py).

Three nodes in one process, as in test_cluster_nodes.py (whose `cluster` fixture this uses).
"""

import asyncio

import pytest

from logbroker.cluster import remote_queue
from logbroker.cluster.cluster_node import ClusterNode
from logbroker.cluster.envelope import REQUEST, Envelope, request_frame
from logbroker.queue.queue_shell import QueueShell
from tests.unit.logbroker.cluster.test_cluster_nodes import (
    CLIENT_LOCAL,
    RecordingSink,
    _consume_header,
    _inject,
    persistent,
    publish,
    session,
    shell_of,
    wait_for,
)
from tests.unit.logbroker.cluster.test_cluster_nodes import cluster as cluster  # the fixture

pytestmark = pytest.mark.timeout(30)


async def _queue_on_a(cluster: dict[str, ClusterNode], name: str) -> QueueShell:
    a = cluster["a"]
    await a.broker.definitions.declare_queue(session(a), name, arguments=CLIENT_LOCAL)
    await wait_for(lambda: all(node.metadata.state.queue("/", name) is not None
                               for node in cluster.values()), "the queue on every node")
    return shell_of(a, name)


async def _drain(node: ClusterNode, queue: str) -> list[tuple[bytes, bool]]:
    got = []
    while (found := await node.broker.consuming.get(session(node), queue, "conn-b:9",
                                        no_ack=True)) is not None:
        got.append((found[2].body, found[1]))
    return got


async def test_a_forwarded_consumer_gets_a_lookahead_but_its_client_only_its_prefetch(
    cluster: dict[str, ClusterNode],
) -> None:
    b, c = cluster["b"], cluster["c"]
    shell = await _queue_on_a(cluster, "ahead")
    bodies = [b"m%d" % i for i in range(60)]
    assert all(await asyncio.gather(*(publish(b.broker, "ahead", persistent(body))
                                      for body in bodies)))
    sink = RecordingSink("conn-c:2")
    _, endpoint = await c.broker.consuming.consume(session(c), "ahead", sink,
                                          consumer_tag="fast", prefetch_count=20)
    # a sends 20 more than the prefetch; c holds them back from its client.
    await wait_for(lambda: shell.core.unacked_count == 40 and len(sink.deliveries) == 20,
                   "the lookahead on a, the prefetch at the client")
    await asyncio.sleep(0.05)
    assert [d[4].body for d in sink.deliveries] == bodies[:20]
    assert shell.core.message_count == 20
    endpoint.ack([d[2] for d in sink.deliveries[:5]])
    await wait_for(lambda: len(sink.deliveries) == 25, "five more from c's buffer")
    await wait_for(lambda: shell.core.message_count == 15, "a refilling c's buffer")
    await asyncio.sleep(0.05)
    assert [d[4].body for d in sink.deliveries] == bodies[:25]
    assert shell.core.unacked_count == 40
    # The channel closes: what its client held comes back redelivered, what c only
    # buffered comes back as it was, never delivered.
    c.broker.consuming.channel_closed("/", "conn-c:2", {"ahead"})
    await wait_for(lambda: shell.core.unacked_count == 0 and shell.core.consumer_count == 0,
                   "everything back on a")
    assert await _drain(b, "ahead") == [(body, 5 <= i < 25) for i, body in enumerate(bodies)
                                        if i >= 5]


async def test_a_cancelled_forwarded_consumer_gives_back_what_its_client_did_not_get(
    cluster: dict[str, ClusterNode],
) -> None:
    b, c = cluster["b"], cluster["c"]
    shell = await _queue_on_a(cluster, "undo")
    bodies = [b"u%d" % i for i in range(30)]
    assert all(await asyncio.gather(*(publish(b.broker, "undo", persistent(body))
                                      for body in bodies)))
    sink = RecordingSink("conn-c:3")
    _, endpoint = await c.broker.consuming.consume(session(c), "undo", sink,
                                          consumer_tag="t", prefetch_count=16)
    await wait_for(lambda: shell.core.unacked_count == 30 and len(sink.deliveries) == 16,
                   "the lookahead on a, the prefetch at the client")
    await asyncio.sleep(0.05)
    assert len(sink.deliveries) == 16
    c.broker.consuming.cancel(session(c), "undo", "t")
    await wait_for(lambda: shell.core.consumer_count == 0 and shell.core.message_count == 14,
                   "the buffered fourteen back on a")
    assert shell.core.unacked_count == 16  # the client's stay with its channel
    endpoint.ack([d[2] for d in sink.deliveries])  # and its acks still count
    await wait_for(lambda: shell.core.unacked_count == 0, "the acks on a")
    assert len(sink.deliveries) == 16
    assert await _drain(b, "undo") == [(body, False) for body in bodies[16:]]


async def test_a_consumer_the_client_node_no_longer_has_is_dropped_and_its_delivery_given_back(
    cluster: dict[str, ClusterNode],
) -> None:
    a, b, c = cluster["a"], cluster["b"], cluster["c"]
    await _queue_on_a(cluster, "stray-1")
    shell = await _queue_on_a(cluster, "stray-2")
    sink = RecordingSink("conn-c:4")
    await c.broker.consuming.consume(session(c), "stray-1", sink, consumer_tag="live",
                            prefetch_count=20)  # c's channel conn-c:4 has credit on a
    # A consumer of that channel on a that c does not know (its consume timed out on c,
    # say): a would deliver to it for ever. c gives the delivery back and a drops it.
    _inject(a, "c", request_frame(REQUEST, 10**15 + 2, Envelope("q.consume", {
        **_consume_header(a, "stray-2", "conn-c:4"), "tag": "zombie"})))
    await wait_for(lambda: shell.core.consumer_count == 1, "the zombie consumer on a")
    assert await publish(b.broker, "stray-2", persistent(b"late"))
    await wait_for(lambda: shell.core.consumer_count == 0 and shell.core.message_count == 1,
                   "c dropping the consumer and giving the delivery back")
    assert shell.core.unacked_count == 0 and sink.deliveries == []
    assert await _drain(b, "stray-2") == [(b"late", False)]  # it never reached a client


async def test_a_message_that_expires_in_the_client_nodes_buffer_expires_on_the_leader(
    cluster: dict[str, ClusterNode],
) -> None:
    a, b, c = cluster["a"], cluster["b"], cluster["c"]
    await a.broker.definitions.declare_queue(session(a), "short", arguments={
        # A TTL long enough that the first 32 are all delivered or buffered before it
        # runs out, even on a loaded machine (at 300 ms some expired on the way).
        **CLIENT_LOCAL, "x-message-ttl": 1000})
    await wait_for(lambda: all(node.metadata.state.queue("/", "short") is not None
                               for node in cluster.values()), "the queue on every node")
    shell = shell_of(a, "short")
    sink = RecordingSink("conn-c:6")
    _, endpoint = await c.broker.consuming.consume(session(c), "short", sink,
                                          consumer_tag="slow", prefetch_count=16)
    assert all(await asyncio.gather(*(publish(b.broker, "short", persistent(b"s%d" % i))
                                      for i in range(32))))
    await wait_for(lambda: shell.core.unacked_count == 32 and len(sink.deliveries) == 16,
                   "16 at the client, 16 buffered")
    await asyncio.sleep(1.1)  # the buffered ones expire while the client is busy
    endpoint.ack([d[2] for d in sink.deliveries])
    await wait_for(lambda: shell.core.unacked_count == 0 and shell.core.message_count == 0,
                   "the expired ones back on a and dropped there")
    await asyncio.sleep(0.05)
    assert len(sink.deliveries) == 16


async def test_full_buffers_of_slow_consumers_do_not_starve_another_on_their_channel(
    cluster: dict[str, ClusterNode], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(remote_queue, "WINDOW", 64)  # a small window: a light test
    a, c = cluster["a"], cluster["c"]
    shell = await _queue_on_a(cluster, "crowded")
    assert all(await asyncio.gather(*(publish(a.broker, "crowded", persistent(b"c%d" % i))
                                      for i in range(200))))
    sink = RecordingSink("conn-c:8")  # one channel; its clients never ack
    for tag in ("s1", "s2", "s3"):
        await c.broker.consuming.consume(session(c), "crowded", sink, consumer_tag=tag,
                                prefetch_count=30)
    # 3 x 30 at the client and 3 x 30 buffered: more than the channel's credit window.
    await wait_for(lambda: shell.core.unacked_count == 180 and len(sink.deliveries) == 90,
                   "every buffer full")
    await c.broker.consuming.consume(session(c), "crowded", sink, consumer_tag="late",
                            prefetch_count=20)
    await wait_for(lambda: sum(d[1] == "late" for d in sink.deliveries) == 20,
                   "the late consumer's share")


async def test_a_channel_closed_during_its_forwarded_consume_leaves_nothing_behind(
    cluster: dict[str, ClusterNode], monkeypatch: pytest.MonkeyPatch,
) -> None:
    b, c = cluster["b"], cluster["c"]
    shell = await _queue_on_a(cluster, "early-close")
    registry = c.remote_queues
    real_call = registry.call

    async def close_while_asking(node: str, op: str, header: dict[str, object]) -> Envelope:
        answer = asyncio.ensure_future(real_call(node, op, header))
        if op == "q.consume":
            await asyncio.sleep(0)  # the consume is on its way to a...
            c.broker.consuming.channel_closed("/", "conn-c:6", {"early-close"})  # ...closed
        return await answer

    monkeypatch.setattr(registry, "call", close_while_asking)
    first = RecordingSink("conn-c:6")
    await c.broker.consuming.consume(session(c), "early-close", first, consumer_tag="t1",
                            prefetch_count=5)
    monkeypatch.undo()
    await wait_for(lambda: shell.core.consumer_count == 0, "a dropping the consumer")
    assert registry.consumers.matching(channel_key="conn-c:6") == []
    # The client reopens the channel (pika reuses its number): the new consumer gets
    # a window from a and its messages, as on any fresh channel.
    again = RecordingSink("conn-c:6")
    await c.broker.consuming.consume(session(c), "early-close", again, consumer_tag="t2",
                            prefetch_count=5)
    assert await publish(b.broker, "early-close", persistent(b"after"))
    await wait_for(lambda: [d[4].body for d in again.deliveries] == [b"after"],
                   "the delivery on the reopened channel")
    assert first.deliveries == []
