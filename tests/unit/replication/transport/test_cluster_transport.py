"""The transport over real sockets on 127.0.0.1 (port 0: the OS picks free ports)."""

import asyncio
import logging
import random
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from typing import Protocol

import pytest

from replication.transport import (
    ClusterTransport,
    FrameTooLargeError,
    PeerAddress,
    TransportLimits,
)
from tests.unit.replication.transport.delay_proxy import DelayProxy

pytestmark = pytest.mark.timeout(10)

SECRET = b"test-cluster-secret"
FAST = TransportLimits(handshake_timeout_s=0.5, reconnect_min_s=0.01, reconnect_max_s=0.05)
LOGGER = "replication.transport"


class Node:
    """A transport plus everything its callbacks reported."""

    def __init__(
        self, name: str, *, secret: bytes = SECRET, limits: TransportLimits = FAST, port: int = 0
    ) -> None:
        self.name = name
        self.frames: dict[str, list[bytes]] = defaultdict(list)
        self.changes: list[tuple[str, bool]] = []
        self.transport = ClusterTransport(
            name,
            secret,
            host="127.0.0.1",
            port=port,
            on_frame=lambda peer, payload: self.frames[peer].append(payload),
            on_peer_change=lambda peer, up: self.changes.append((peer, up)),
            limits=limits,
            rng=random.Random(name),
        )

    @property
    def address(self) -> PeerAddress:
        return PeerAddress(self.name, "127.0.0.1", self.transport.port)

    def connected(self, *peers: str) -> bool:
        return all(self.transport.is_connected(peer) for peer in peers)


class MakeNode(Protocol):
    async def __call__(
        self, name: str, *, secret: bytes = ..., limits: TransportLimits = ..., port: int = ...
    ) -> Node: ...


@pytest.fixture
async def nodes() -> AsyncIterator[MakeNode]:
    """A factory of started nodes, all stopped at the end."""
    made: list[Node] = []

    async def make(
        name: str, *, secret: bytes = SECRET, limits: TransportLimits = FAST, port: int = 0
    ) -> Node:
        node = Node(name, secret=secret, limits=limits, port=port)
        await node.transport.start()
        made.append(node)
        return node

    yield make
    for node in made:
        await node.transport.stop()


async def wait_until(predicate: Callable[[], bool], timeout: float = 1.5) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


def send_all(src: Node, dst: str, count: int, tag: str) -> list[bytes]:
    payloads = [f"{tag}-{i}".encode() for i in range(count)]
    assert all(src.transport.send(dst, p) for p in payloads)
    return payloads


async def test_two_nodes_exchange_frames_in_order_both_ways(nodes: MakeNode) -> None:
    a, b = await nodes("n1@127.0.0.1"), await nodes("n2@127.0.0.1")
    a.transport.set_peers([b.address])  # b does not know a: it must accept a anyway
    await wait_until(lambda: a.connected(b.name) and b.connected(a.name))
    assert a.transport.connected_peers() == {b.name}
    assert b.transport.connected_peers() == {a.name}

    a_to_b = send_all(a, b.name, 500, "a")
    b_to_a = send_all(b, a.name, 500, "b")
    await wait_until(lambda: len(b.frames[a.name]) == 500 and len(a.frames[b.name]) == 500)
    assert b.frames[a.name] == a_to_b
    assert a.frames[b.name] == b_to_a
    assert a.changes == [(b.name, True)] and b.changes == [(a.name, True)]
    assert b.transport.stats().connections_dialed == 0  # the one link is a's
    assert a.transport.stats().open_connections == b.transport.stats().open_connections == 1


async def test_three_nodes_mesh_with_one_connection_per_pair(nodes: MakeNode) -> None:
    trio = [await nodes(f"n{i}") for i in (1, 2, 3)]
    everyone = [node.address for node in trio]
    for node in trio:
        node.transport.set_peers(everyone)  # its own entry is ignored
    names = [node.name for node in trio]
    await wait_until(lambda: all(n.connected(*(m for m in names if m != n.name)) for n in trio))

    sent = {
        (s.name, d.name): send_all(s, d.name, 200, f"{s.name}>{d.name}")
        for s in trio
        for d in trio
        if s is not d
    }
    await wait_until(
        lambda: all(
            len(d.frames[s]) == 200 for (s, dn), _ in sent.items() for d in trio if d.name == dn
        )
    )
    for (src, dst), payloads in sent.items():
        assert next(n for n in trio if n.name == dst).frames[src] == payloads
    await wait_until(lambda: all(n.transport.stats().open_connections == 2 for n in trio))


@pytest.mark.parametrize("seed", range(4))
async def test_simultaneous_dial_leaves_one_connection_and_loses_nothing(
    nodes: MakeNode, seed: int
) -> None:
    a, b = await nodes(f"a{seed}"), await nodes(f"b{seed}")
    a.transport.set_peers([b.address])
    b.transport.set_peers([a.address])  # both dial in the same loop iteration
    sent: dict[str, list[bytes]] = {a.name: [], b.name: []}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 0.3
    i = 0
    while loop.time() < deadline:  # keep sending through the switch-over
        for src, dst in ((a, b), (b, a)):
            payload = f"{src.name}-{i}".encode()
            if src.transport.send(dst.name, payload):
                sent[src.name].append(payload)
        i += 1
        await asyncio.sleep(0.001 * (i % 3))
    await wait_until(
        lambda: (
            a.transport.stats().open_connections == 1 and b.transport.stats().open_connections == 1
        )
    )
    await wait_until(
        lambda: (
            len(b.frames[a.name]) >= len(sent[a.name])
            and len(a.frames[b.name]) >= len(sent[b.name])
        )
    )
    assert sent[a.name] and sent[b.name]
    assert b.frames[a.name] == sent[a.name]  # every accepted frame, in order, once
    assert a.frames[b.name] == sent[b.name]
    assert a.changes == [(b.name, True)] and b.changes == [(a.name, True)]  # no flap
    replaced = a.transport.stats().links_replaced + b.transport.stats().links_replaced
    assert replaced >= 1  # both connections did come up: the tie-break ran
    assert a.transport.stats().frames_dropped == b.transport.stats().frames_dropped == 0


async def test_wrong_secret_never_connects_and_is_logged(
    nodes: MakeNode, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    a, b = await nodes("n1"), await nodes("n2", secret=b"another-secret")
    a.transport.set_peers([b.address])
    await wait_until(lambda: b.transport.stats().handshake_failures >= 2)
    assert not a.connected(b.name) and not b.connected(a.name)
    assert a.changes == b.changes == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        m.startswith("refused cluster connection from 127.0.0.1:")
        and m.endswith(": wrong cluster secret")
        for m in warnings
    ), warnings
    assert (
        f"cannot connect to cluster peer n2 at {b.address.host}:{b.address.port}: "
        "wrong cluster secret (retrying)" in warnings
    )
    assert a.transport.stats().handshake_failures >= 2  # and it kept retrying


async def test_a_restarted_peer_is_reconnected(nodes: MakeNode) -> None:
    a, b = await nodes("n1"), await nodes("n2")
    a.transport.set_peers([b.address])
    await wait_until(lambda: a.connected(b.name) and b.connected(a.name))
    before = send_all(a, b.name, 3, "before")
    await wait_until(lambda: b.frames[a.name] == before)
    port = b.transport.port
    await b.transport.stop()
    await wait_until(lambda: not a.connected(b.name))
    assert a.changes == [(b.name, True), (b.name, False)]
    assert not a.transport.send(b.name, b"while down")

    b2 = await nodes("n2", port=port)
    await wait_until(lambda: a.connected(b2.name) and b2.connected(a.name))
    a_to_b = send_all(a, b2.name, 50, "after")
    b_to_a = send_all(b2, a.name, 50, "back")
    await wait_until(lambda: len(b2.frames[a.name]) == 50 and len(a.frames[b2.name]) == 50)
    assert b2.frames[a.name] == a_to_b
    assert a.frames[b2.name] == b_to_a
    assert a.changes == [(b.name, True), (b.name, False), (b.name, True)]


async def test_a_peer_restarted_before_its_old_link_died_replaces_it(
    nodes: MakeNode,
) -> None:
    a, b = await nodes("n1"), await nodes("n2")
    b.transport.set_peers([a.address])
    await wait_until(lambda: a.connected(b.name))
    # A second process with b's name (a new incarnation) arrives while the old link lives.
    b2 = await nodes("n2")
    b2.transport.set_peers([a.address])
    await wait_until(lambda: b2.connected(a.name) and not b.connected(a.name))
    assert a.changes == [(b.name, True), (b.name, False), (b.name, True)]
    payloads = send_all(a, b.name, 10, "x")
    await wait_until(lambda: len(b2.frames[a.name]) == 10)
    assert b2.frames[a.name] == payloads and b.frames[a.name] == []


async def test_send_to_an_unconnected_peer_returns_false(nodes: MakeNode) -> None:
    a = await nodes("n1")
    assert not a.transport.send("nobody", b"x")
    a.transport.set_peers([PeerAddress("n9", "127.0.0.1", 9)])  # discard port: refused
    assert not a.transport.send("n9", b"x")
    assert not a.transport.is_connected("n9")
    assert a.transport.stats().frames_refused == 2


async def test_a_full_send_queue_returns_false(nodes: MakeNode) -> None:
    small = TransportLimits(
        send_queue_frames=3,
        send_queue_bytes=100,
        handshake_timeout_s=0.5,
        reconnect_min_s=0.01,
        reconnect_max_s=0.05,
    )
    a, b = await nodes("n1", limits=small), await nodes("n2")
    a.transport.set_peers([b.address])
    await wait_until(lambda: a.connected(b.name))
    # No await between sends: the writer cannot run, so the queue fills.
    results = [a.transport.send(b.name, f"{i}".encode()) for i in range(10)]
    assert results == [True] * 3 + [False] * 7
    await wait_until(lambda: len(b.frames[a.name]) == 3)
    assert [a.transport.send(b.name, b"x" * 40) for _ in range(3)] == [True, True, False]
    await wait_until(lambda: len(b.frames[a.name]) == 5)
    assert b.frames[a.name] == [b"0", b"1", b"2", b"x" * 40, b"x" * 40]
    assert a.transport.stats().frames_refused == 8


async def test_an_oversize_frame_is_refused_on_send_and_closes_the_link_on_receipt(
    nodes: MakeNode, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    tight = TransportLimits(
        max_frame_bytes=1000, handshake_timeout_s=0.5, reconnect_min_s=0.01, reconnect_max_s=0.05
    )
    a, b = await nodes("n1", limits=tight), await nodes("n2")
    a.transport.set_peers([b.address])
    await wait_until(lambda: a.connected(b.name) and b.connected(a.name))
    with pytest.raises(FrameTooLargeError):
        a.transport.send(b.name, b"x" * 1001)
    with pytest.raises(ValueError):
        a.transport.send("not-even-connected", b"x" * 1001)
    assert b.transport.send(a.name, b"x" * 5000)  # b's limit allows it; a's does not
    await wait_until(lambda: (b.name, False) in a.changes)
    assert a.frames[b.name] == []
    assert any("exceeds the 1000-byte limit" in r.getMessage() for r in caplog.records)
    await wait_until(lambda: a.connected(b.name))  # a redials; the link works again
    assert b.transport.send(a.name, b"small")
    await wait_until(lambda: a.frames[b.name] == [b"small"])


async def test_a_silent_or_foreign_client_is_refused(
    nodes: MakeNode, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    a = await nodes("n1", limits=TransportLimits(handshake_timeout_s=0.2))
    _, silent = await asyncio.open_connection("127.0.0.1", a.transport.port)
    reader, http = await asyncio.open_connection("127.0.0.1", a.transport.port)
    http.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    async with asyncio.timeout(1.5):
        await reader.read()  # closed by the transport
    await wait_until(lambda: a.transport.stats().handshake_failures == 2)
    messages = [r.getMessage() for r in caplog.records]
    assert any(
        m.endswith("not a logbroker cluster peer (its first frame would be 1195725856 bytes)")
        for m in messages
    ), messages
    assert any(m.endswith(": no handshake within 0.2 s") for m in messages), messages
    await wait_until(lambda: a.transport.stats().open_connections == 0)
    for writer in (silent, http):
        writer.close()


async def test_the_dialer_refuses_a_node_with_another_name(
    nodes: MakeNode, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    a, b = await nodes("n1"), await nodes("n2")
    a.transport.set_peers([PeerAddress("n3", "127.0.0.1", b.transport.port)])
    await wait_until(lambda: a.transport.stats().handshake_failures >= 1)
    assert not a.transport.connected_peers() and not b.transport.connected_peers()
    assert b.changes == []  # b never saw a completed handshake
    assert any("peer is 'n2', expected 'n3'" in r.getMessage() for r in caplog.records)


async def test_dropped_peers_are_disconnected_and_not_redialled(
    nodes: MakeNode,
) -> None:
    a, b = await nodes("n1"), await nodes("n2")
    a.transport.set_peers([b.address])
    await wait_until(lambda: b.connected(a.name))
    a.transport.set_peers([])
    await wait_until(lambda: not b.connected(a.name))
    assert a.changes == [(b.name, True), (b.name, False)]
    await asyncio.sleep(0.2)  # several backoff periods
    assert not a.connected(b.name) and not b.connected(a.name)
    assert a.transport.stats().connections_dialed == 1


async def test_stop_leaves_no_pending_tasks(nodes: MakeNode) -> None:
    a, b, c = await nodes("n1"), await nodes("n2"), await nodes("n3")
    for node in (a, b, c):
        node.transport.set_peers(
            [a.address, b.address, c.address, PeerAddress("dead", "127.0.0.1", 9)]
        )
    await wait_until(lambda: a.connected("n2", "n3") and b.connected("n3"))
    _, hanging = await asyncio.open_connection("127.0.0.1", a.transport.port)  # mid-handshake
    for i in range(100):
        a.transport.send("n2", b"%d" % i)
        b.transport.send("n1", b"%d" % i)
    for node in (a, b, c):
        await node.transport.stop()
    assert a.changes[-2:] in ([("n2", False), ("n3", False)], [("n3", False), ("n2", False)])
    assert a.transport.stats().open_connections == 0
    assert not a.transport.send("n2", b"late")
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert others == []
    hanging.close()


@pytest.mark.parametrize(
    ("connect_delay", "delays", "first_link_delay"),
    [
        (0.1, (0, 0), 0),
        (0, (0.08, 0), 0),
        (0, (0, 0.08), 0),
        (0.03, (0.05, 0.05), 0),
        (0.25, (0, 0), 0.04),
    ],
    ids=["late-connect", "slow-to-n2", "slow-to-n1", "slow-both", "first-link-slower"],
)
async def test_a_winning_link_that_arrives_late_takes_over_without_loss_or_reorder(
    nodes: MakeNode,
    connect_delay: float,
    delays: tuple[float, float],
    first_link_delay: float,
) -> None:
    # n2 dials n1 and traffic flows both ways; n1's own dial (which wins the
    # tie-break: n1 < n2) is held up by a proxy, completes later and replaces
    # the first link while frames are in flight on it. When the first link is
    # the slower one, frames written on the new link overtake those still in
    # flight on the old one unless both ends hold them back.
    a, b = await nodes("n1"), await nodes("n2")
    late = DelayProxy(b.transport.port, connect_delay=connect_delay, delays=delays)
    first = DelayProxy(a.transport.port, delays=(first_link_delay, first_link_delay))
    await late.start()
    await first.start()
    try:
        a.transport.set_peers([PeerAddress(b.name, "127.0.0.1", late.port)])
        b.transport.set_peers([PeerAddress(a.name, "127.0.0.1", first.port)])
        sent: dict[str, list[bytes]] = {a.name: [], b.name: []}
        delivered_at_switch: tuple[int, int] | None = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 0.4
        i = 0
        while loop.time() < deadline:
            for src, dst in ((a, b), (b, a)):
                payload = f"{src.name}-{i}".encode()
                if src.transport.send(dst.name, payload):
                    sent[src.name].append(payload)
            if delivered_at_switch is None and a.transport.stats().links_replaced:
                delivered_at_switch = (len(b.frames[a.name]), len(a.frames[b.name]))
            i += 1
            await asyncio.sleep(0.001)
        await wait_until(
            lambda: (
                len(b.frames[a.name]) >= len(sent[a.name])
                and len(a.frames[b.name]) >= len(sent[b.name])
            )
        )
        assert b.frames[a.name] == sent[a.name]
        assert a.frames[b.name] == sent[b.name]
        assert a.changes == [(b.name, True)] and b.changes == [(a.name, True)]
        assert delivered_at_switch is not None and min(delivered_at_switch) > 0
        await wait_until(
            lambda: (
                a.transport.stats().open_connections == 1
                and b.transport.stats().open_connections == 1
            )
        )
        assert a.transport.stats().connections_dialed == 1  # the survivor is n1's dial
    finally:
        await late.stop()
        await first.stop()


async def test_a_silent_peer_is_a_broken_link_and_pings_keep_an_idle_one_up(
    nodes: MakeNode,
) -> None:
    beating = TransportLimits(handshake_timeout_s=0.5, reconnect_min_s=0.01,
                              reconnect_max_s=0.05, ping_interval_s=0.05, idle_timeout_s=0.3)
    a = await nodes("a", limits=beating)
    b = await nodes("b", limits=beating)
    a.transport.set_peers([b.address])
    await wait_until(lambda: a.connected("b") and b.connected("a"))
    await asyncio.sleep(1.0)  # nothing to send for three idle timeouts: pings only
    assert a.changes == [("b", True)] and b.changes == [("a", True)]
    assert not a.frames and not b.frames  # pings are never delivered

    # c goes silent as a paused process does (it never pings): its TCP link stays
    # open, and only the heartbeat timeout tells a that c is gone.
    c = await nodes("c", limits=TransportLimits(
        handshake_timeout_s=0.5, reconnect_min_s=0.01, reconnect_max_s=0.05,
        ping_interval_s=5.0, idle_timeout_s=10.0))
    a.transport.set_peers([b.address, c.address])
    await wait_until(lambda: a.connected("c"))
    await wait_until(lambda: ("c", False) in a.changes, timeout=2.0)


async def test_what_arrives_after_this_node_stalled_past_the_timeout_is_not_delivered(
    nodes: MakeNode,
) -> None:
    """A stalled process (SIGSTOP) stops pinging, so its peer closes the link and acts on
    it; frames the link held must not be delivered once the process runs again."""
    beating = TransportLimits(handshake_timeout_s=0.5, reconnect_min_s=0.01,
                              reconnect_max_s=0.05, ping_interval_s=0.05, idle_timeout_s=0.3)
    a = await nodes("a", limits=beating)
    b = await nodes("b", limits=beating)
    a.transport.set_peers([b.address])
    await wait_until(lambda: a.connected("b") and b.connected("a"))
    assert b.transport.send("a", b"sent before the stall")
    await asyncio.sleep(0)  # b's writer puts it on the wire: it waits in a's socket
    time.sleep(0.5)  # the whole loop stalls, as a paused process does
    await wait_until(lambda: ("b", False) in a.changes)
    await asyncio.sleep(0.1)
    assert a.frames["b"] == []
    await wait_until(lambda: a.connected("b") and b.connected("a"))
    assert b.transport.send("a", b"after")
    await wait_until(lambda: a.frames["b"] == [b"after"])
