"""`ConnectionFlow`: one client connection's answer to "may its reader read more?".

Theory of operation
-------------------
A connection that stops reading its socket slows its client down: the
client's sends back up into TCP. An AMQP connection and a WebSocket each hold
one `ConnectionFlow`; their reader loop asks it only (`wait`, before each
read). What it answers is fed by the objects that know each reason, which stay
where they are:

* ``in_flight``: publishes read and not answered yet, over the connection's
  limits (`add` / `remove`: an AMQP connection counts the bytes routed but not
  yet durable, so a publisher goes at the disk's pace; a WebSocket counts its
  unanswered frames and messages);
* ``flow``: queues the connection published to hold their publishers back
  while their consumers catch up (`logbroker.queue.publisher_flow`; for a queue
  led by another node, `logbroker.cluster.remote_flow`): the broker's
  publisher appends their futures to `holds` during the publish call, so the
  very next read waits for them;
* ``blocked``: a memory or disk alarm (`logbroker.resource_alarms`, fed by
  `alarm`) while the connection has published (`published`): RabbitMQ stops
  reading publishing connections until the alarm clears;
* ``output``: the connection's own output is over its high-water mark (the
  `congested` and `output_room` ports: the socket's write buffer, the
  WebSocket outbox), asked last, just before the read.

`reasons()` is the answer as it stands (empty: read on). `wait()` waits the
reasons out, in that order, and tells `on_state` what RabbitMQ shows for the
connection meanwhile: "flow" while queues hold it, "blocked" while an alarm
does, "running" after (the AMQP shell also stops counting the silence as
missed heartbeats).

Invariants: a hold is waited for once (it is taken from `holds` when waited
on) and never longer than `HOLD_WAIT_MAX_S`, so a queue that never lets go
cannot stall a reader; after `close` no reason holds a reader back and every
waiter wakes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from logbroker.queue.flow_gate import take_pending, wait_for_holds

__all__ = ["ConnectionFlow"]

IN_FLIGHT, FLOW, BLOCKED, OUTPUT = "in_flight", "flow", "blocked", "output"


async def _always_room() -> bool:
    return True


def _never() -> bool:
    return False


class ConnectionFlow:
    """Whether one connection's reader may read, and why not.

    `pause_at`: per unit counted in flight ("bytes", "frames", ...), the count at
    which the reader pauses. `congested`: whether the connection's output is over
    its high-water mark; `output_room` waits until it is not, and answers False
    once the connection can send no more."""

    def __init__(self, pause_at: Mapping[str, int],
                 congested: Callable[[], bool] = _never,
                 output_room: Callable[[], Awaitable[bool]] = _always_room,
                 on_state: Callable[[str], None] = lambda _state: None) -> None:
        self._pause_at = dict(pause_at)
        self._counts = dict.fromkeys(self._pause_at, 0)
        self._congested = congested
        self._output_room = output_room
        self._on_state = on_state
        self._room = asyncio.Event()
        self._room.set()
        self._unblocked = asyncio.Event()
        self._unblocked.set()
        self._published = False
        self.closed = False
        # Queues holding this connection's publishers back; the publisher appends.
        self.holds: list[asyncio.Future[None]] = []

    # -- what feeds it ---------------------------------------------------------------

    def add(self, unit: str, count: int) -> None:
        """`count` more `unit`s in flight (read, not answered yet)."""
        counts = self._counts  # per publish on the AMQP path: kept to a few operations
        counts[unit] += count
        if counts[unit] >= self._pause_at[unit] and not self.closed:
            self._room.clear()

    def remove(self, unit: str, count: int) -> None:
        self._counts[unit] -= count
        if not self._room.is_set() and all(
                self._counts[name] < limit for name, limit in self._pause_at.items()):
            self._room.set()

    def in_flight(self, unit: str) -> int:
        return self._counts[unit]

    def published(self) -> None:
        """The connection published: an alarm now stops its reader."""
        self._published = True

    def alarm(self, active: bool) -> None:
        """A resource alarm went on or off."""
        if active:
            self._unblocked.clear()
        else:
            self._unblocked.set()

    def close(self) -> None:
        """The connection is over: wake every waiter, hold nothing back any more."""
        self.closed = True
        self._room.set()
        self._unblocked.set()

    # -- what the reader asks ----------------------------------------------------------

    def reasons(self) -> tuple[str, ...]:
        """Why the reader must not read now (empty: it may)."""
        if self.closed:
            return ()
        found = []
        if not self._room.is_set():
            found.append(IN_FLIGHT)
        if any(not hold.done() for hold in self.holds):
            found.append(FLOW)
        if self._blocked():
            found.append(BLOCKED)
        if self._congested():
            found.append(OUTPUT)
        return tuple(found)

    async def wait(self) -> bool:
        """Wait until the reader may read; False when the connection can send no more
        (its reader should stop)."""
        while not self._room.is_set():
            await self._room.wait()
        await self._wait_for_holds()
        if self._blocked():
            await self._wait_for_unblock()
        if self.closed:
            return False
        return not self._congested() or await self._output_room()

    async def _wait_for_holds(self) -> None:
        holds = take_pending(self.holds)
        if not holds:
            return
        self._on_state(FLOW)
        try:
            await wait_for_holds(holds)
        finally:
            self._on_state("running")

    async def _wait_for_unblock(self) -> None:
        self._on_state(BLOCKED)
        try:
            while self._blocked():
                await self._unblocked.wait()
        finally:
            self._on_state("running")

    def _blocked(self) -> bool:
        return self._published and not self._unblocked.is_set() and not self.closed
