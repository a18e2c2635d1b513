"""Fencing what travels over a cluster link: forwarded publishes carry the epoch their
sender believed, forwarded acks the link generation of the delivery they answer, and a
consume whose channel closed meanwhile leaves nothing behind on the leader.

Three nodes in one process, as in test_cluster_nodes.py (whose `cluster` fixture this uses).
"""

import asyncio
import logging

import pytest

from logbroker.cluster.cluster_node import ClusterNode
from logbroker.cluster.envelope import NOTICE, Envelope, encode_envelope
from logbroker.cluster.forwarded_message import encode_message
from logbroker.cluster.queue_host import (
    REQUEUE_GRACE_S,
    forwarded_channel_key,
    forwarded_channel_prefix,
)
from logbroker.queue.consumers import Consumer
from logbroker.queue.message_meta import MessageMeta
from logbroker.queue.queue_core import QueueCore
from logbroker.queue.queue_limits import QueueLimits
from tests.unit.logbroker.cluster.test_cluster_nodes import (
    RecordingSink,
    persistent,
    session,
    shell_of,
    wait_for,
)
from tests.unit.logbroker.cluster.test_cluster_nodes import cluster as cluster  # the fixture

pytestmark = pytest.mark.timeout(30)
REPLICATED = {"x-queue-replicas": 3, "x-queue-leader-locator": "client-local"}


async def _replicated_on_a(cluster: dict[str, ClusterNode], name: str) -> None:
    a = cluster["a"]
    await a.broker.definitions.declare_queue(session(a), name, durable=True,
                                    arguments=REPLICATED)

    def in_sync_everywhere() -> bool:
        records = [node.metadata.state.queue("/", name) for node in cluster.values()]
        return all(r is not None and r.leader_node == "a" and sorted(r.in_sync) == ["a", "b", "c"]
                   for r in records)
    await wait_for(in_sync_everywhere, "the queue led by a with every replica in sync")


async def test_a_publish_forwarded_to_a_leader_fenced_meanwhile_is_nacked_without_an_error(
    cluster: dict[str, ClusterNode], monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    a, c = cluster["a"], cluster["c"]
    await _replicated_on_a(cluster, "fenced")
    gate = shell_of(a, "fenced").replication
    assert gate is not None
    real_confirm = gate.confirm_when_replicated

    def fenced_first(base_offset: int, next_offset: int) -> asyncio.Future[int]:
        # The epoch moves on between the write and its confirm.
        gate.fence("a newer epoch was elected")
        return real_confirm(base_offset, next_offset)

    monkeypatch.setattr(gate, "confirm_when_replicated", fenced_first)
    message = persistent(b"too late")
    message.routing_key = "fenced"
    with caplog.at_level(logging.INFO):
        assert await c.remote_queues.publish("/", [(message, ["fenced"])]) == [False]
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert errors == [], [r.getMessage() for r in errors]
    assert any("not confirmed" in r.getMessage() and r.name.endswith("queue_host")
               for r in caplog.records)


async def test_a_consume_answered_after_its_channel_closed_leaves_no_consumer_or_sink(
    cluster: dict[str, ClusterNode], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The leader registers the consumer only after the channel's close reached it (it
    waited to catch up meanwhile): the close found nothing to drop there, so the client's
    node, which learns of it from the answer, must drop it, or it stays until the link
    breaks (an empty queue never delivers to it, which would also have dropped it)."""
    a, c = cluster["a"], cluster["c"]
    await a.broker.definitions.declare_queue(session(a), "late-answer",
                                    arguments={"x-queue-leader-locator": "client-local"})
    await wait_for(lambda: c.metadata.state.queue("/", "late-answer") is not None,
                   "the queue on c")
    shell = shell_of(a, "late-answer")
    host = a.queue_host
    real_caught_up = host._caught_up

    async def slow_caught_up(header: dict[str, object]) -> None:
        await asyncio.sleep(0.1)  # c's close arrives while a waits here
        await real_caught_up(header)

    monkeypatch.setattr(host, "_caught_up", slow_caught_up)
    sink = RecordingSink("conn-c:11")
    consume = asyncio.ensure_future(c.broker.consuming.consume(
        session(c), "late-answer", sink, consumer_tag="t", prefetch_count=5))
    await asyncio.sleep(0.02)  # the consume is on its way to a
    c.broker.consuming.channel_closed("/", "conn-c:11", {"late-answer"})
    await consume
    await wait_for(lambda: shell.core.consumer_count == 0 and not host._sinks,
                   "the consumer and its sink gone from a", timeout_s=1.0)
    assert c.remote_queues.consumers.matching(channel_key="conn-c:11") == []


async def test_a_publish_meant_for_a_later_epoch_is_nacked_not_appended(
    cluster: dict[str, ClusterNode],
) -> None:
    """c's metadata names a newer epoch of the queue than a leads: a is deposed (its shell
    not closed yet) and must not append what c meant for the new leader."""
    a = cluster["a"]
    await _replicated_on_a(cluster, "epochs")
    shell = shell_of(a, "epochs")
    assert shell.replication is not None
    epoch = shell.replication.leader.epoch

    def forwarded(body: bytes, meant: int) -> Envelope:
        message = persistent(body)
        message.routing_key = "epochs"
        return Envelope("q.publish", {"v": "/", "a": a.driver.applied_index,
                                      "t": [["epochs"]], "e": {"epochs": meant}},
                        (encode_message(message),))

    stale = await a.queue_host._publish("c", forwarded(b"for the next leader", epoch + 1))
    assert stale.header["c"] == [False]
    current = await a.queue_host._publish("c", forwarded(b"for this leader", epoch))
    assert current.header["c"] == [True]
    # Only the second was appended: nothing by a deposed leader.
    assert (shell.readable_end, shell.core.message_count) == (1, 1)


def test_a_settle_counts_only_for_deliveries_over_the_link_generation_it_names() -> None:
    """The leader's decision (`QueueHost._settle`): node c's channel conn-c:1 held offset 0
    over the link of generation 7; the link broke, the message was requeued and went
    out again to the same channel key over the link of generation 8."""
    core = QueueCore(QueueLimits())
    core.enqueue(0, MessageMeta(10))
    before = forwarded_channel_key("c", 7, "conn-c:1")
    after = forwarded_channel_key("c", 8, "conn-c:1")
    core.add_consumer(Consumer("t", before, prefetch_count=1), now_ms=0)
    core.pump(0)
    assert core.held_by_channels([0], forwarded_channel_prefix("c", 7)) == [0]  # in the grace
    core.requeue_channel(before)
    core.remove_consumer("t", now_ms=0)
    core.add_consumer(Consumer("t", after, prefetch_count=1), now_ms=0)
    core.pump(0)
    assert core.held_by_channels([0], forwarded_channel_prefix("c", 7)) == []  # stale
    assert core.held_by_channels([0], forwarded_channel_prefix("c", 8)) == [0]
    assert core.held_by_channels([0], forwarded_channel_prefix("c", 80)) == []
    assert core.held_by_channels([0], forwarded_channel_prefix("c")) == [0]  # names none


async def test_an_ack_from_before_a_link_flap_never_settles_the_redelivery_to_the_same_node(
    cluster: dict[str, ClusterNode],
) -> None:
    """The link between a (the leader) and c flaps. c's first consumer held the message;
    a requeues it and delivers it again, to another consumer on c. The first client's
    late ack must not settle that delivery: if its consumer then died, the message would
    be lost. Fenced twice: c drops acks of endpoints from before the break, and a counts
    a settle only for deliveries over the link generation it names."""
    a, c = cluster["a"], cluster["c"]
    await a.broker.definitions.declare_queue(session(a), "flap",
                                    arguments={"x-queue-leader-locator": "client-local"})
    await wait_for(lambda: c.metadata.state.queue("/", "flap") is not None, "the queue on c")
    shell = shell_of(a, "flap")
    first = RecordingSink("conn-c:20")
    _, before = await c.broker.consuming.consume(session(c), "flap", first,
                                        consumer_tag="first", prefetch_count=1)
    message = persistent(b"once")
    message.routing_key = "flap"
    assert (await a.broker.publisher.publish("/", message)).confirmed
    await wait_for(lambda: len(first.deliveries) == 1, "the delivery to c's first consumer")
    old_generation = a.queue_host.generation("c")

    links = a.transport._links
    link = links.peers["c"].current
    assert link is not None
    links.close(link, "a flap", abort=True)
    await wait_for(lambda: first.cancelled == ["first"], "c seeing the break")
    await wait_for(lambda: a.transport.is_connected("c") and c.transport.is_connected("a"),
                   "the link back")
    await asyncio.sleep(REQUEUE_GRACE_S + 0.05)
    assert shell.core.message_count == 1  # requeued
    second = RecordingSink("conn-c:21")
    await c.broker.consuming.consume(session(c), "flap", second, consumer_tag="second",
                            prefetch_count=1)
    await wait_for(lambda: [(d[2], d[3]) for d in second.deliveries] == [(0, True)],
                   "the redelivery to c's second consumer")
    new_generation = a.queue_host.generation("c")
    assert new_generation > old_generation

    before.ack([0])  # the first client acks its copy, late
    # And one that got through with the old generation (a node that did not see the
    # break, say) counts for nothing on a either.
    a.rpc.on_frame("c", bytes([NOTICE]) + encode_envelope(Envelope("q.settle", {
        "v": "/", "q": "flap", "o": [0], "ack": True, "g": old_generation})))
    await asyncio.sleep(0.1)
    assert shell.core.unacked_of(forwarded_channel_key("c", new_generation, "conn-c:21")) == [0]
    # The second consumer's channel closes without an ack: the message is not lost.
    c.broker.consuming.channel_closed("/", "conn-c:21", {"flap"})
    await wait_for(lambda: shell.core.message_count == 1 and shell.core.unacked_count == 0,
                   "the message ready again on a")
