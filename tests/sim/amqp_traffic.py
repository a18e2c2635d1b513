"""`AmqpTraffic`: the queue simulation's AMQP clients, their links and the ports they reach.

One `AmqpPublisher` per queue connects to a random live node (another one
than before, when it reconnects and there is a choice); the node end of the
connection is an `AmqpPort` around the shipped `AmqpConnection`, and a
`ClientLink` carries the bytes between them. Each tick the links deliver
what is due, the ports run their machines' timers, and the clients read
and keep their heartbeats; half of each queue's publishes go through its
AMQP client while that one is connected (`publish`), the rest through the
direct `Publisher`, so the load is the simulation's `publish_rate` as before.

The node's confirm of a publish names the publish number the port took for
it here (`_register`, numbered with the direct publisher of the same queue,
so numbers never collide); `confirm` takes it back to the port and delivery
tag it came from. A number is answered once: a second confirm of it, or one
that finds its port gone (the node crashed, the connection ended), reaches
nobody, and the client keeps the publish as maybe-published.

Faults: a crashed node resets its links; a partition leaves each link
silent with even odds (the client on the other side of the cut) until the
heal, so either side's heartbeats may end it first.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Protocol

from api.amqp.server_properties import ConnectionConfig
from tests.sim.amqp_client import AmqpPublisher
from tests.sim.amqp_port import AmqpPort, PublishEntry
from tests.sim.client_link import ClientLink
from tests.sim.queue_clients import Publisher

LINK_MAX_DELAY = 2  # ticks a chunk of bytes may take, as the direct clients' CLIENT_MAX_DELAY
CONFIG = ConnectionConfig(heartbeat_s=1)  # 4 ticks: see amqp_port.MS_PER_TICK


class TrafficWorld(Protocol):
    now: int
    rng: random.Random
    stats: Counter[str]

    def log(self, text: str) -> None: ...


class AmqpTraffic:
    def __init__(self, world: TrafficWorld, nodes: Mapping[str, PublishEntry],
                 publishers: Mapping[str, Publisher]) -> None:
        self.world = world
        self.nodes = nodes
        self.publishers = publishers
        self.clients = {queue: AmqpPublisher(f"{queue}-amqp", publisher)
                        for queue, publisher in publishers.items()}
        self._ports: list[AmqpPort] = []
        # (queue, publish number) -> (port, channel, delivery tag); None once answered
        self._routes: dict[tuple[str, int], tuple[AmqpPort, int, int] | None] = {}

    # ------------------------------------------------- the clients' Connector

    @property
    def now(self) -> int:
        return self.world.now

    @property
    def rng(self) -> random.Random:
        return self.world.rng

    def count(self, kind: str) -> None:
        self.world.stats[kind] += 1

    def log(self, text: str) -> None:
        self.world.log(text)

    def connect(self, avoid: str | None) -> ClientLink | None:
        live = [name for name, node in self.nodes.items() if node.alive]
        others = [name for name in live if name != avoid]
        if not live:
            return None
        name = self.rng.choice(others or live)
        link = ClientLink(name, self.rng, LINK_MAX_DELAY)
        self._ports.append(AmqpPort(self.nodes[name], link, CONFIG, self.now, self._register))
        return link

    # ---------------------------------------------------------------- ticks

    def tick(self, close_rate: float) -> None:
        """Links deliver what is due, ports run their timers, clients read and beat (and
        close their connections at `close_rate` a tick)."""
        now = self.now
        for port in self._ports:
            data, ended = port.link.due_at_node(now)
            if data:
                port.receive(data, now)
            if ended:
                port.client_gone()
            else:
                port.tick(now)
            for failure in port.failures:
                self.count("amqp_failed_by_node")
                self.log(f"{port.link.node} ends an AMQP connection: {failure.reply_text}")
            port.failures.clear()
        self._ports = [port for port in self._ports if not port.ended]
        for client in self.clients.values():
            client.tick(self, close_rate)

    def publish(self, queue: str) -> bool:
        """Half of a queue's publishes go through its AMQP client while it is connected
        (the load stays the simulation's `publish_rate`); False: the direct one's turn."""
        client = self.clients[queue]
        if not client.ready or self.rng.random() < 0.5:
            return False
        client.publish(self)
        return True

    # ------------------------------------------------------------- confirms

    def _register(self, queue: str, port: AmqpPort, channel: int, tag: int) -> int:
        number = self.publishers[queue].next_number()
        self._routes[(queue, number)] = (port, channel, tag)
        return number

    def confirm(self, queue: str, publish: int, ok: bool) -> bool:
        """Take the node's confirm of `publish` to its port; False if no port sent it."""
        key = (queue, publish)
        if key not in self._routes:
            return False
        route, self._routes[key] = self._routes[key], None
        if route is not None:
            port, channel, tag = route
            port.confirmed(channel, tag, ok, self.now)
        return True

    # --------------------------------------------------------------- faults

    def node_crashed(self, node: str) -> None:
        for port in self._ports:
            if port.link.node == node:
                port.client_gone()
                port.link.crash(self.now)
        self._ports = [port for port in self._ports if not port.ended]

    def partitioned(self) -> None:
        for link in self._links():
            link.silent = self.rng.random() < 0.5

    def healed(self) -> None:
        for link in self._links():
            link.silent = False

    def _links(self) -> Iterator[ClientLink]:
        seen: list[ClientLink] = []
        for link in [port.link for port in self._ports] + [c.link for c in self.clients.values()]:
            if link is not None and all(link is not other for other in seen):
                seen.append(link)
                yield link
