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
* ``flow`` (:class:`~api.connection_flow.ConnectionFlow`) is what the shell
  asks before each read: publishes add the bytes they have in flight until
  they are durable (a fast publisher is slowed to the disk's pace by TCP
  back-pressure, the way RabbitMQ's credit flow ends up blocking the reader),
  and the broker's publisher adds the holds of queues whose consumers fall
  behind (:mod:`logbroker.queue.publisher_flow`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from api.amqp.connection_machine import AmqpConnection
from api.amqp.direct_reply import DirectReplyRegistry
from api.connection_flow import ConnectionFlow
from logbroker.broker import Broker
from logbroker.broker_config import Session

__all__ = ["IN_FLIGHT_UNIT", "ConnectionContext"]

IN_FLIGHT_UNIT = "bytes"  # what an AMQP connection counts in flight: publish bodies


@dataclass(eq=False)
class ConnectionContext:
    """One open connection as its channels see it."""

    broker: Broker
    machine: AmqpConnection
    session: Session
    notify_output: Callable[[], None]
    after_read: Callable[[Callable[[], None]], None]
    congested: Callable[[], bool]
    flow: ConnectionFlow  # what the shell asks before it reads the socket again
    cancel_notify: bool = True  # the client has the consumer_cancel_notify capability
    direct_reply: DirectReplyRegistry = field(default_factory=DirectReplyRegistry)  # per listener
    # Deliveries were written to the machine since the last flush (the shell checks
    # the leader lease before it writes them: see ConnectionHandler._flush).
    deliveries_pending: bool = False
