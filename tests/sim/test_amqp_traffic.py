"""The simulation's AMQP path on its own: client bytes -> `ClientLink` -> `AmqpPort` (the
shipped `AmqpConnection`) -> a node's publish entry, and confirms back as basic.ack."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from tests.sim.amqp_traffic import AmqpTraffic
from tests.sim.client_link import ClientLink
from tests.sim.queue_checkers import Ledger
from tests.sim.queue_clients import Publisher


@dataclass
class FakeNode:
    alive: bool = True
    published: list[tuple[str, int, bytes]] = field(default_factory=list)

    def client_publish(self, queue: str, publish: int, payload: bytes) -> None:
        self.published.append((queue, publish, payload))


@dataclass
class FakeWorld:
    now: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    stats: Counter[str] = field(default_factory=Counter)
    trace: list[str] = field(default_factory=list)

    def log(self, text: str) -> None:
        self.trace.append(text)


def _setup() -> tuple[FakeWorld, dict[str, FakeNode], Ledger, AmqpTraffic]:
    world, nodes, ledger = FakeWorld(), {"n1": FakeNode(), "n2": FakeNode()}, Ledger("q0")
    return world, nodes, ledger, AmqpTraffic(world, nodes, {"q0": Publisher("q0", ledger)})


def _run(world: FakeWorld, traffic: AmqpTraffic, ticks: int) -> None:
    for _ in range(ticks):
        world.now += 1
        traffic.tick(0.0)


def _publish(traffic: AmqpTraffic) -> None:
    while not traffic.publish("q0"):  # its turn comes with even odds
        pass


def test_a_publish_goes_through_the_machine_and_its_ack_comes_back() -> None:
    world, nodes, ledger, traffic = _setup()
    _run(world, traffic, 30)
    client = traffic.clients["q0"]
    assert client.ready and client.link is not None
    node = nodes[client.link.node]
    _publish(traffic)
    _run(world, traffic, 10)
    [(queue, number, payload)] = node.published
    assert queue == "q0" and payload in ledger.published
    ledger.on_committed(client.link.node, 0, payload)
    assert traffic.confirm("q0", number, True)
    _run(world, traffic, 10)
    assert ledger.confirmed == {payload} and world.stats["amqp_confirmed"] == 1
    assert traffic.confirm("q0", number, True)  # answered once: the second reaches nobody
    assert not traffic.confirm("q0", number + 1, True)  # not an AMQP publish: the direct path


def test_a_crash_leaves_the_publish_maybe_published_and_the_client_goes_elsewhere() -> None:
    world, nodes, ledger, traffic = _setup()
    _run(world, traffic, 30)
    client = traffic.clients["q0"]
    assert client.link is not None
    first = client.link.node
    _publish(traffic)
    traffic.node_crashed(first)
    nodes[first].alive = False
    _run(world, traffic, 30)
    assert not nodes[first].published and len(ledger.published) == 1
    assert not ledger.confirmed and world.stats["amqp_breaks"] == 1
    assert client.ready and client.link is not None and client.link.node != first


def test_a_silent_link_ends_by_the_heartbeats_of_both_sides() -> None:
    world, _, _, traffic = _setup()
    _run(world, traffic, 30)
    client = traffic.clients["q0"]
    assert client.link is not None
    client.link.silent = True
    _run(world, traffic, 12)
    assert world.stats["amqp_heartbeat_timeouts"] == 1
    assert world.stats["amqp_failed_by_node"] == 1
    assert any("missed heartbeats from client" in line for line in world.trace)


def test_the_link_keeps_order_splits_bytes_and_ends_behind_them() -> None:
    link = ClientLink("n1", random.Random(3), max_delay=2)
    frames = [bytes([i]) * 20 for i in range(5)]
    link.send_to_node(frames, now=0)
    link.close_from_client(now=0)
    got, ended, now = b"", False, 0
    while not ended:
        now += 1
        data, ended = link.due_at_node(now)
        got += data
        assert link.node_mid_frame() == (len(got) % 20 != 0)
    assert got == b"".join(frames)
    link.send_to_node([b"late"], now)
    assert link.due_at_node(now + 10) == (b"", False)


def test_a_client_closes_with_the_close_handshake_and_connects_again() -> None:
    world, _, _, traffic = _setup()
    _run(world, traffic, 30)
    world.now += 1
    traffic.tick(1.0)  # closes now
    assert not traffic.clients["q0"].ready
    _run(world, traffic, 30)
    assert world.stats["amqp_client_closes"] == 1
    assert any("closed by the client" in line for line in world.trace)
    assert world.stats["amqp_connections"] == 2 and traffic.clients["q0"].ready
