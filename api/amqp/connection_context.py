"""What every channel of one AMQP connection shares: broker, machine, session, limits.

Theory of operation
-------------------
The connection shell (:mod:`api.amqp.server`) owns the socket and the
:class:`~api.amqp.connection_machine.AmqpConnection`; the channel sessions
(:mod:`api.amqp.channel_session`) turn methods into broker calls and write
their answers through the machine. They meet here:

* ``machine`` queues output; sessions call ``notify_output()`` after writing to
  it from outside the shell's own event handling (a queue's pump delivering, a
  publish confirmed), and the shell flushes once per loop iteration;
* ``after_read(work)`` runs ``work`` once the shell has handled the whole
  socket read it came from (or on the next loop iteration when it came from
  outside input handling): a channel's publish batch starts, and its acks are
  settled, once per read;
* ``congested()`` is True while the socket's write buffer is over its high-water
  mark: channels then report no prefetch credit, so queues stop delivering
  until the client reads (no-ack consumers excepted, as the queue core allows);
* :class:`InFlight` bounds the bytes of publishes routed but not yet durable on
  the connection; over the limit the shell stops reading from the socket, which
  is how a fast publisher is slowed to the disk's pace (TCP back-pressure, the
  way RabbitMQ's credit flow ends up blocking the reader).
* ``flow_holds`` collects what queues whose consumers fall behind on a
  saturated broker hand their publishers (:mod:`logbroker.queue.publisher_flow`);
  the shell does not read again until those are done.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from api.amqp.connection_machine import AmqpConnection
from api.amqp.direct_reply import DirectReplyRegistry
from logbroker.broker import Broker
from logbroker.broker_config import Session

__all__ = ["ConnectionContext", "InFlight"]


class InFlight:
    """Bytes of publishes submitted and not yet settled, with a limit to wait on."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.bytes = 0
        self._room = asyncio.Event()
        self._room.set()

    def add(self, size: int) -> None:
        self.bytes += size
        if self.bytes > self.limit_bytes:
            self._room.clear()

    def remove(self, size: int) -> None:
        self.bytes -= size
        if self.bytes <= self.limit_bytes:
            self._room.set()

    @property
    def full(self) -> bool:
        return self.bytes > self.limit_bytes

    async def wait_for_room(self) -> None:
        await self._room.wait()


@dataclass(eq=False)
class ConnectionContext:
    """One open connection as its channels see it."""

    broker: Broker
    machine: AmqpConnection
    session: Session
    notify_output: Callable[[], None]
    after_read: Callable[[Callable[[], None]], None]
    congested: Callable[[], bool]
    in_flight: InFlight
    # Futures of queues holding this connection's publishers back (publisher_flow);
    # the shell reads no more from the socket until they are done.
    flow_holds: list[asyncio.Future[None]] = field(default_factory=list)
    cancel_notify: bool = True  # the client has the consumer_cancel_notify capability
    direct_reply: DirectReplyRegistry = field(default_factory=DirectReplyRegistry)  # per listener
    # Deliveries were written to the machine since the last flush (the shell checks
    # the leader lease before it writes them: see ConnectionHandler._flush).
    deliveries_pending: bool = False
