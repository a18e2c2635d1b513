"""The queue simulation's clients: publishers with confirms, consumers with manual acks.

Clients are outside the cluster network: they talk to one node at a time over
a reliable connection (`ClientWorld.later`: delayed, never lost; a consumer's
channel is FIFO) that breaks when that node crashes or its queue shell
closes (basic.cancel, which arrives behind the deliveries sent before it).
What arrives on a channel the client has closed is never seen.

- `Publisher`: publishes unique payloads through a random live node, which
  hands them to the queue's leader (locally or over the cluster network);
  the leader confirms once the high watermark passes the message, or nacks.
  The queue's AMQP publisher (amqp_client.py), which goes through the
  shipped connection machine instead, numbers its payloads from the same
  count (`next_number`).
- `ConsumerClient`: subscribes at the leader that a random live node's
  metadata names, with a prefetch; acks each delivery after a random delay;
  sometimes closes its channel (what it held is requeued, redelivered). A
  consumer whose shell closed resubscribes, wherever the metadata then says.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

from tests.sim.queue_checkers import Ledger
from tests.sim.queue_leader import LeaderReplica


class ClientWorld(Protocol):
    now: int
    rng: random.Random

    def later(self, delay: int, action: Callable[[], None]) -> None: ...

    def client_delay(self) -> int: ...

    def publish_via(self, queue: str, publish: int, payload: bytes) -> bool: ...

    def leader_shell(self, queue: str) -> LeaderReplica | None: ...


class Publisher:
    def __init__(self, queue: str, ledger: Ledger) -> None:
        self.queue = queue
        self.ledger = ledger
        self.sent = 0

    def next_number(self) -> int:
        """A publish number of this queue (the AMQP clients draw from the same count)."""
        self.sent += 1
        return self.sent

    def publish(self, world: ClientWorld) -> None:
        number = self.next_number()
        payload = self.ledger.payload(number)
        self.ledger.on_publish(payload)
        if not world.publish_via(self.queue, number, payload):
            self.ledger.counts["unsent"] += 1

    def confirmed(self, publish: int, ok: bool) -> None:
        self.ledger.on_confirm(self.ledger.payload(publish), ok)


class ConsumerClient:
    def __init__(self, name: str, queue: str, ledger: Ledger, prefetch: int,
                 ack_delay: int) -> None:
        self.name = name
        self.queue = queue
        self.ledger = ledger
        self.prefetch = prefetch
        self.ack_delay = ack_delay
        self.shell: LeaderReplica | None = None
        self.channel = ""
        self._generation = 0
        self._retry_at = 0
        self._acks: list[tuple[int, int]] = []  # (due, offset) on the current channel
        self._last_arrival = 0  # the leader -> client direction of the channel is FIFO
        self.world: ClientWorld | None = None

    def tick(self, world: ClientWorld, close_rate: float) -> None:
        self.world = world
        if self.shell is None:
            if world.now >= self._retry_at:
                self._subscribe(world)
            return
        due = [offset for at, offset in self._acks if at <= world.now]
        if due:
            self._acks = [(at, offset) for at, offset in self._acks if at > world.now]
            shell, channel = self.shell, self.channel
            world.later(world.client_delay(), lambda: self._ack_arrives(shell, channel, due))
        if close_rate and world.rng.random() < close_rate:
            shell, channel = self.shell, self.channel
            self._drop(world.now + world.rng.randint(1, 4))
            self.ledger.counts["channel_closes"] += 1
            world.later(world.client_delay(), lambda: shell.channel_closed(channel))

    def _subscribe(self, world: ClientWorld) -> None:
        shell = world.leader_shell(self.queue)
        if shell is None or shell.closed or shell.fenced is not None:
            self._retry_at = world.now + world.rng.randint(1, 4)
            return
        self._generation += 1
        self.shell, self.channel = shell, f"{self.name}.{self._generation}"
        shell.add_consumer(self.channel, self.prefetch, self)
        self.ledger.counts["subscriptions"] += 1

    def _ack_arrives(self, shell: LeaderReplica, channel: str, offsets: list[int]) -> None:
        # Acks travel on the channel: once it is closed they go nowhere.
        if shell is self.shell and channel == self.channel and not shell.closed:
            shell.ack(offsets)

    def _to_client(self, action: Callable[[], None]) -> None:
        world = self.world
        assert world is not None
        self._last_arrival = max(self._last_arrival, world.now + world.client_delay())
        world.later(self._last_arrival - world.now, action)

    def deliver(self, shell: LeaderReplica, channel: str, offset: int, payload: bytes,
                redelivered: bool) -> None:
        self._to_client(lambda: self._arrives(shell, channel, offset, payload, redelivered))

    def _arrives(self, shell: LeaderReplica, channel: str, offset: int, payload: bytes,
                 redelivered: bool) -> None:
        if shell is not self.shell or channel != self.channel:
            return  # the channel was closed or cancelled first: nobody sees it
        self.ledger.on_delivery(self.name, shell.node, offset, payload, redelivered)
        world = self.world
        assert world is not None
        self._acks.append((world.now + world.rng.randint(0, self.ack_delay), offset))

    def cancelled(self, shell: LeaderReplica) -> None:
        channel = self.channel
        self._to_client(lambda: self._cancel_arrives(shell, channel))

    def _cancel_arrives(self, shell: LeaderReplica, channel: str) -> None:
        if shell is self.shell and channel == self.channel:
            world = self.world
            assert world is not None
            self._drop(world.now + world.rng.randint(1, 4))

    def _drop(self, retry_at: int) -> None:
        self.shell, self.channel = None, ""
        self._acks.clear()
        self._retry_at = retry_at

    @property
    def idle(self) -> bool:
        return not self._acks
