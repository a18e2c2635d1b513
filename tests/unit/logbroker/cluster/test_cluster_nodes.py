"""Three `ClusterNode`s in one process, over real sockets on 127.0.0.1.

Definitions go through Raft; a queue led by one node is used from the
others (`RemoteQueue` on the client's node, `QueueHost` on the leader).
"""

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pamqp import commands

from bench.free_ports import free_port
from logbroker.broker import Broker
from logbroker.broker_config import BrokerConfig, Session
from logbroker.cluster.cluster_node import ClusterNode
from logbroker.cluster.cluster_settings import ClusterSettings
from logbroker.cluster.envelope import NOTICE, REQUEST, Envelope, encode_envelope, request_frame
from logbroker.cluster.remote_queue import RemoteQueue
from logbroker.errors import BrokerError
from logbroker.message import Message
from logbroker.queue.consumers import Consumer
from logbroker.queue.queue_shell import QueueShell
from replication.transport import PeerAddress

pytestmark = pytest.mark.timeout(30)

NAMES = ("a", "b", "c")
SECRET = b"cluster-test-secret"
CLIENT_LOCAL = {"x-queue-leader-locator": "client-local"}


@dataclass
class RecordingSink:
    channel_key: str
    deliveries: list[tuple[str, str | None, int, bool, Message]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)

    def deliver(self, queue: str, consumer_tag: str | None, offset: int, redelivered: bool,
                message: Message) -> None:
        self.deliveries.append((queue, consumer_tag, offset, redelivered, message))

    def consumer_cancelled(self, queue: str, consumer_tag: str,
                           leader_moved: bool = False) -> None:
        self.cancelled.append(consumer_tag)

    def credit(self) -> int | None:
        return None


async def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def session(node: ClusterNode) -> Session:
    return Session(f"conn-{node.node_name}", "guest", "/")


def bootstrapped(node: ClusterNode) -> bool:
    if node.metadata.state.vhost("/") is None:
        return False
    try:
        node.broker.access.check(session(node), "queue", "any", "configure")
    except BrokerError:
        return False  # the permissions are not applied here yet
    return True


def persistent(body: bytes, **properties: object) -> Message:
    return Message("", "", body, commands.Basic.Properties(delivery_mode=2, **properties))


async def publish(broker: Broker, queue: str, message: Message) -> bool:
    message.exchange, message.routing_key = "", queue
    result = await broker.publisher.publish("/", message)
    return result.routed and result.confirmed


def shell_of(node: ClusterNode, queue: str) -> QueueShell:
    shell = node.broker.queue("/", queue)
    assert shell is not None, f"{queue} is not open on {node.node_name}"
    return shell


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[dict[str, ClusterNode]]:
    ports = [free_port() for _ in NAMES]
    peers = tuple(PeerAddress(name, "127.0.0.1", port) for name, port in zip(NAMES, ports,
                                                                            strict=True))
    nodes = {}
    for name, port in zip(NAMES, ports, strict=True):
        settings = ClusterSettings(
            node_name=name, secret=SECRET, bind_host="127.0.0.1", cluster_port=port,
            peers=peers, raft_tick_s=0.02, heartbeat_ms=100, session_timeout_ms=600)
        config = BrokerConfig(data_dir=os.path.join(tmp_path, name), node_name=name,
                              memory_high_watermark_bytes=1 << 40, disk_free_limit_bytes=0)
        nodes[name] = ClusterNode(settings, config)
    started: list[ClusterNode] = []
    try:
        for node in nodes.values():
            await node.start()
            started.append(node)
        everyone = list(nodes.values())
        await wait_for(lambda: sum(node.driver.is_leader for node in everyone) == 1
                       and len({node.driver.leader_id for node in everyone}) == 1,
                       "a Raft leader all nodes agree on")
        await wait_for(lambda: all(bootstrapped(node) for node in everyone),
                       "the bootstrap (vhost '/', user, permissions) on every node")
        await wait_for(lambda: all(node.transport.connected_peers() == set(NAMES) - {name}
                                   for name, node in nodes.items()),
                       "every cluster link")
        yield nodes
    finally:
        for node in reversed(started):
            with contextlib.suppress(Exception):
                await node.stop()


async def test_bootstrap_and_node_registry(cluster: dict[str, ClusterNode]) -> None:
    leaders = {node.driver.leader_id for node in cluster.values()}
    assert len(leaders) == 1 and leaders <= set(NAMES)
    for node in cluster.values():
        assert node.driver.membership.voters == set(NAMES)
        assert [user.name for user in node.metadata.state.users()] == ["guest"]

    # Heartbeats make the controller register every node (AddClusterNode), up.
    def registered() -> bool:
        return all(
            [(r.name, r.cluster_port, r.up) for r in node.metadata.state.cluster_nodes()]
            == [(name, other.transport.port, True) for name, other in cluster.items()]
            for node in cluster.values())

    await wait_for(registered, "every node registered and up in every node's metadata")
    status = cluster["b"].membership.status()
    assert status["node"] == "b" and status["leader"] in NAMES
    assert [(n["name"], n["role"], n["status"], n["connected"]) for n in status["nodes"]] == [
        (name, "voter", "up", True) for name in NAMES]


async def test_queue_used_from_every_node(cluster: dict[str, ClusterNode]) -> None:
    a, b, c = cluster["a"], cluster["b"], cluster["c"]
    assert await a.broker.definitions.declare_queue(
        session(a), "work", durable=True, arguments=CLIENT_LOCAL) == ("work", 0, 0)

    def led_by_a_everywhere() -> bool:
        records = [node.metadata.state.queue("/", "work") for node in cluster.values()]
        return all(record is not None and record.leader_node == "a" for record in records)

    await wait_for(led_by_a_everywhere, "the queue record on every node")
    shell = shell_of(a, "work")
    assert b.broker.queue("/", "work") is None and c.broker.queue("/", "work") is None
    assert isinstance(b.broker.endpoint("/", "work"), RemoteQueue)

    # Published through b: forwarded to a, confirmed once a holds it.
    message = persistent(b"hello", message_id="m-1", headers={"k": "v"})
    assert await publish(b.broker, "work", message)
    assert shell.core.message_count == 1
    # A passive declare through c counts on a.
    assert await c.broker.definitions.declare_queue(session(c), "work", passive=True) == (
        "work", 1, 0)

    # Fetched through c, acked through c.
    got = await c.broker.consuming.get(session(c), "work", "conn-c:1", no_ack=False)
    assert got is not None
    offset, redelivered, fetched, left, endpoint = got
    assert (fetched.body, redelivered, left) == (b"hello", False, 0)
    assert fetched.properties.message_id == "m-1"
    assert fetched.properties.headers == {"k": "v"}
    assert fetched.routing_key == "work"
    assert isinstance(endpoint, RemoteQueue) and endpoint.node == "a"
    assert shell.core.unacked_count == 1
    endpoint.ack([offset])
    await wait_for(lambda: shell.core.unacked_count == 0, "the ack to settle on a")
    assert shell.core.message_count == 0
    assert await c.broker.consuming.get(session(c), "work", "conn-c:1", no_ack=True) is None


async def test_consumer_on_another_node_receives_and_acks(
    cluster: dict[str, ClusterNode],
) -> None:
    a, b, c = cluster["a"], cluster["b"], cluster["c"]
    await a.broker.definitions.declare_queue(session(a), "jobs", durable=True,
                                    arguments=CLIENT_LOCAL)
    await wait_for(lambda: all(node.metadata.state.queue("/", "jobs") is not None
                               for node in cluster.values()), "the queue on every node")
    shell = shell_of(a, "jobs")
    sink = RecordingSink("conn-c:1")
    tag, endpoint = await c.broker.consuming.consume(session(c), "jobs", sink,
                                            consumer_tag="ctag", prefetch_count=10)
    assert tag == "ctag" and isinstance(endpoint, RemoteQueue)
    assert shell.core.consumer_count == 1

    bodies = [f"job-{i}".encode() for i in range(20)]
    results = await asyncio.gather(*(publish(b.broker, "jobs", persistent(body))
                                     for body in bodies))
    assert all(results)
    # Prefetch 10: ten delivered (in publish order), the rest wait on a.
    await wait_for(lambda: len(sink.deliveries) == 10, "the first ten deliveries")
    await asyncio.sleep(0.05)
    assert len(sink.deliveries) == 10
    assert [d[4].body for d in sink.deliveries] == bodies[:10]
    assert {(d[0], d[1], d[3]) for d in sink.deliveries} == {("jobs", "ctag", False)}
    assert (shell.core.unacked_count, shell.core.message_count) == (10, 10)

    endpoint.ack([d[2] for d in sink.deliveries])
    await wait_for(lambda: len(sink.deliveries) == 20, "the other ten deliveries")
    assert [d[4].body for d in sink.deliveries] == bodies
    endpoint.ack([d[2] for d in sink.deliveries[10:]])
    await wait_for(lambda: shell.core.unacked_count == 0, "every ack settled on a")
    assert shell.core.message_count == 0
    assert (await b.broker.definitions.declare_queue(session(b), "jobs", passive=True)) == (
        "jobs", 0, 1)

    c.broker.consuming.cancel(session(c), "jobs", "ctag")
    await wait_for(lambda: shell.core.consumer_count == 0, "the cancel to reach a")
    assert sink.cancelled == []


async def test_closing_the_consuming_channel_requeues_on_the_leader(
    cluster: dict[str, ClusterNode],
) -> None:
    a, b, c = cluster["a"], cluster["b"], cluster["c"]
    await a.broker.definitions.declare_queue(session(a), "redo", arguments=CLIENT_LOCAL)
    await wait_for(lambda: all(node.metadata.state.queue("/", "redo") is not None
                               for node in cluster.values()), "the queue on every node")
    shell = shell_of(a, "redo")
    sink = RecordingSink("conn-c:7")
    await c.broker.consuming.consume(session(c), "redo", sink, consumer_tag="t")
    assert await publish(b.broker, "redo", persistent(b"again"))
    await wait_for(lambda: len(sink.deliveries) == 1, "the delivery")
    c.broker.consuming.channel_closed("/", "conn-c:7", {"redo"})
    await wait_for(lambda: shell.core.consumer_count == 0 and shell.core.message_count == 1,
                   "the channel's message requeued on a")
    got = await b.broker.consuming.get(session(b), "redo", "conn-b:1", no_ack=True)
    assert got is not None and got[2].body == b"again" and got[1] is True  # redelivered


def _inject(node: ClusterNode, sender: str, frame: bytes) -> None:
    """Hand `node` a frame as its cluster link does (several per read of the socket)."""
    node.rpc.on_frame(sender, frame)


def _consume_header(node: ClusterNode, queue: str, channel_key: str) -> dict[str, object]:
    return {"v": "/", "q": queue, "tag": "ghost-tag", "ck": channel_key, "prefetch": 0,
            "priority": 0, "no_ack": False, "exclusive": False,
            "a": node.driver.applied_index}


async def test_channel_closed_right_after_consume_leaves_no_consumer(
    cluster: dict[str, ClusterNode],
) -> None:
    a = cluster["a"]
    await a.broker.definitions.declare_queue(session(a), "race", arguments=CLIENT_LOCAL)
    shell = shell_of(a, "race")
    # c forwards basic.consume, then its channel closes: both frames in one read on a.
    _inject(a, "c", request_frame(REQUEST, 10**15, Envelope(
        "q.consume", _consume_header(a, "race", "conn-c:9"))))
    _inject(a, "c", bytes([NOTICE]) + encode_envelope(Envelope(
        "q.channel_closed", {"v": "/", "q": "race", "ck": "conn-c:9"})))
    await asyncio.sleep(0.1)
    assert shell.core.consumer_count == 0


async def _consumed_from_c(a: ClusterNode, b: ClusterNode, queue: str, channel_key: str,
                           request_id: int) -> QueueShell:
    """Queue `queue` led by a, with a consumer that node c forwarded (frames injected as
    c's link would hand them) and credit for one delivery; a's shell of it."""
    await a.broker.definitions.declare_queue(session(a), queue, arguments=CLIENT_LOCAL)
    await wait_for(lambda: b.metadata.state.queue("/", queue) is not None, "the queue on b")
    shell = shell_of(a, queue)
    _inject(a, "c", request_frame(REQUEST, request_id, Envelope(
        "q.consume", _consume_header(a, queue, channel_key))))
    await asyncio.sleep(0.02)
    _inject(a, "c", bytes([NOTICE]) + encode_envelope(Envelope(
        "q.credit", {"ck": channel_key, "n": 1})))
    return shell


async def test_a_delivery_to_a_channel_gone_on_the_client_node_is_given_back(
    cluster: dict[str, ClusterNode],
) -> None:
    a, b = cluster["a"], cluster["b"]
    # A consumer of c's channel conn-c:5 that c no longer has (it closed meanwhile).
    shell = await _consumed_from_c(a, b, "ghost", "conn-c:5", 10**15 + 1)
    assert await publish(b.broker, "ghost", persistent(b"lost?"))
    # Counted, not watched: the delivery and its return can both be over by the time
    # the publish is confirmed.
    await wait_for(lambda: shell.counters.delivered == 1, "the delivery to c")
    await wait_for(lambda: shell.core.unacked_count == 0 and shell.core.message_count == 1,
                   "c giving the message back", timeout_s=1.0)


async def test_a_broken_link_requeues_what_the_channel_held_only_after_a_grace(
    cluster: dict[str, ClusterNode],
) -> None:
    """c may still hand its client what it buffered until it sees the break too: a's
    flagged redelivery must not come first (duplicates are only ever flagged)."""
    from logbroker.cluster.queue_host import REQUEUE_GRACE_S

    a, b = cluster["a"], cluster["b"]
    shell = await _consumed_from_c(a, b, "grace", "conn-c:7", 10**15 + 2)
    assert await publish(a.broker, "grace", persistent(b"held by c"))
    await wait_for(lambda: shell.core.unacked_count == 1, "the delivery to c")
    a.queue_host.peer_down("c")
    assert shell.core.consumer_count == 0  # no more deliveries to c
    await asyncio.sleep(REQUEUE_GRACE_S / 2)
    assert (shell.core.unacked_count, shell.core.message_count) == (1, 0)  # still held
    local = RecordingSink("conn-a:1")
    consumer = Consumer("local", "conn-a:1", prefetch_count=0, no_ack=True)
    shell.add_consumer(consumer, local)
    await wait_for(lambda: bool(local.deliveries), "the redelivery", timeout_s=2.0)
    assert [(d[2], d[3]) for d in local.deliveries] == [(0, True)]  # flagged


def _settle_from(node: ClusterNode, sender: str, queue: str, offsets: list[int]) -> None:
    _inject(node, sender, bytes([NOTICE]) + encode_envelope(Envelope(
        "q.settle", {"v": "/", "q": queue, "o": offsets, "ack": True})))


async def test_an_ack_from_before_a_broken_link_never_settles_a_later_delivery(
    cluster: dict[str, ClusterNode],
) -> None:
    """c's client acks what it got before the link broke, after a requeued it and
    delivered it to another consumer: that consumer's delivery stays unacked (its
    prefetch holds), and only its own ack settles it."""
    from logbroker.cluster.queue_host import REQUEUE_GRACE_S

    a, b = cluster["a"], cluster["b"]
    shell = await _consumed_from_c(a, b, "stale", "conn-c:8", 10**15 + 3)
    assert await publish(a.broker, "stale", persistent(b"once"))
    await wait_for(lambda: shell.core.unacked_count == 1, "the delivery to c")
    a.queue_host.peer_down("c")
    await asyncio.sleep(REQUEUE_GRACE_S + 0.05)
    local = RecordingSink("conn-a:2")
    shell.add_consumer(Consumer("local", "conn-a:2", prefetch_count=1), local)
    await wait_for(lambda: bool(local.deliveries), "the redelivery", timeout_s=2.0)
    _settle_from(a, "c", "stale", [0])  # the link is back; c's client acks its copy
    await asyncio.sleep(0.05)
    assert shell.core.unacked_of("conn-a:2") == [0]  # still the local consumer's
    shell.ack([0])
    assert shell.core.unacked_count == 0 and shell.core.message_count == 0


async def test_an_ack_during_the_requeue_grace_still_counts(
    cluster: dict[str, ClusterNode],
) -> None:
    from logbroker.cluster.queue_host import REQUEUE_GRACE_S

    a, b = cluster["a"], cluster["b"]
    shell = await _consumed_from_c(a, b, "graced", "conn-c:10", 10**15 + 4)
    assert await publish(a.broker, "graced", persistent(b"acked in time"))
    await wait_for(lambda: shell.core.unacked_count == 1, "the delivery to c")
    a.queue_host.peer_down("c")
    _settle_from(a, "c", "graced", [0])  # its client acked before a requeued it
    await wait_for(lambda: shell.core.unacked_count == 0, "the ack on a")
    await asyncio.sleep(REQUEUE_GRACE_S + 0.05)
    assert shell.core.message_count == 0  # settled, so never redelivered


async def test_a_membership_change_asked_of_a_follower_is_made_by_the_leader(
        cluster: dict[str, ClusterNode]) -> None:
    leader = next(node for node in cluster.values() if node.driver.is_leader)
    asked, removed = [node for node in cluster.values() if node is not leader]
    await wait_for(lambda: leader.metadata.state.cluster_node(removed.node_name) is not None,
                   "the node to remove registered")
    await asked.membership.remove_node(removed.node_name)
    await wait_for(lambda: all(removed.node_name not in node.driver.membership.nodes
                               and node.metadata.state.cluster_node(removed.node_name) is None
                               for node in (leader, asked)),
                   "the node gone from the membership and the metadata")


async def test_a_leader_asked_to_remove_itself_hands_over_first(
        cluster: dict[str, ClusterNode]) -> None:
    leader = next(node for node in cluster.values() if node.driver.is_leader)
    others = [node for node in cluster.values() if node is not leader]
    await wait_for(lambda: leader.metadata.state.cluster_node(leader.node_name) is not None,
                   "the leader registered")
    await leader.membership.remove_node(leader.node_name)
    assert not leader.driver.is_leader  # it handed over before it was removed
    await wait_for(lambda: any(node.driver.is_leader for node in others)
                   and all(leader.node_name not in node.driver.membership.nodes
                           for node in others),
                   "another leader, and the old one out of the membership")
