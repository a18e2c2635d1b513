"""The pure AMQP 0-9-1 server-side connection machine: bytes in, events out;
broker commands in, bytes out.

Theory of operation
-------------------
Modelled on h11: the shell feeds received bytes with ``receive_data(data, now_ms)``,
drains decoded events with ``next_events()``, carries ``data_to_send()`` to the
socket, and calls ``tick(now_ms)`` no later than ``next_deadline_ms()``. No
sockets, tasks or clocks inside; time only enters as ``now_ms``. The broker
layer reacts to events by calling ``accept_open`` / ``refuse_open``,
``send_method``, ``send_content``, ``close_channel``, ``close_connection``,
``send_blocked`` / ``send_unblocked``. A shell loop, in outline::

    conn = AmqpConnection(config, authenticate, now_ms=clock_ms())
    while not conn.closed:
        data = await read_until(conn.next_deadline_ms())   # b"" on timeout
        conn.receive_data(data, clock_ms()) if data else conn.tick(clock_ms())
        for event in conn.next_events():
            broker.handle(event)                           # may call conn.send_*()
        await write(conn.data_to_send())                   # back-pressure here
    await write(conn.data_to_send()); close_socket()

Everything that is protocol rather than broker semantics is decided here, the
way RabbitMQ decides it: version negotiation, SASL, tuning, frame and content
limits, channel numbering and handshakes, the spec's "discard everything but
close / close-ok while closing" rule, heartbeats, the reply code of every
protocol error. :class:`AmqpConnection` owns the state (see
:mod:`api.amqp.connection_state`), the input loop, the broker commands and the
endings; channel 0 is :mod:`api.amqp.handshake`, the other channels
:mod:`api.amqp.channel_table`, time :mod:`api.amqp.timers`, framing
:mod:`api.amqp.wire`.

Invariants
----------
* ``receive_data`` never raises for any input: bad input becomes a
  connection.close with a reply code plus a ``ConnectionFailed`` event (for a
  bad protocol header: our protocol header, then the end of the connection).
* ``ConnectionClosed`` is emitted exactly once, as the last event; afterwards
  input is discarded and nothing more is queued for sending.
* Memory is bounded: after each ``receive_data`` the input buffer holds at most
  one incomplete frame (frames larger than frame_max are refused from their
  7-byte header, before their payload arrives), except
  while ``reading_paused`` (the shell should stop reading then); content per
  channel is bounded by ``max_message_bytes``; ``pending_output_bytes`` tells
  the shell how much output waits.
* Sends that race with a close (channel or connection already closing) are
  dropped and reported by a False return; misuse (e.g. a content method through
  ``send_method``) raises ValueError.
"""

from __future__ import annotations

from pamqp import base, commands, common

from api.amqp.channel_table import CONTENT_METHODS, MACHINE_ONLY_METHODS, ChannelTable, frame_ids
from api.amqp.connection_state import ENDING_STATES, NOT_READING_STATES, ConnectionState
from api.amqp.events import ConnectionClosed, ConnectionFailed, Event
from api.amqp.frame_buffers import Inbox, Outbox
from api.amqp.frame_encoding import build_method, encode_content, encode_delivery
from api.amqp.handshake import (
    CONNECTION_CLASS_ID,
    OPEN_IDS,
    Authenticator,
    Ending,
    EndKind,
    Handshake,
)
from api.amqp.negotiation import CHANNEL_NUMBER_MAX, Tuning
from api.amqp.reply_texts import truncate_shortstr
from api.amqp.server_properties import ConnectionConfig
from api.amqp.timers import Timers
from api.amqp.wire import FRAME_HEARTBEAT, ProtocolError, RawFrame, check_frame, method_name
from logbroker.metadata.reply_codes import ReplyCode, is_connection_error

__all__ = ["AmqpConnection", "Authenticator", "ConnectionState"]


class AmqpConnection:
    """One client connection, server side (see the module docstring)."""

    def __init__(self, config: ConnectionConfig, authenticate: Authenticator, now_ms: int) -> None:
        self._config = config
        self._state = ConnectionState.AWAITING_HEADER
        self._inbox = Inbox()
        self._out = Outbox(now_ms)
        self._events: list[Event] = []
        self._handshake = Handshake(config, authenticate, self._out, self._events)
        self._channels = ChannelTable(
            CHANNEL_NUMBER_MAX, config.max_message_bytes, self._out, self._events
        )
        self._timers = Timers(now_ms, config.handshake_timeout_ms, self._out)
        self._close_reason: tuple[int, str] = (0, "")
        self._blocked = False

    # -- state the shell and the broker may read ------------------------------------

    @property
    def config(self) -> ConnectionConfig:
        return self._config

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def closed(self) -> bool:
        """True once ConnectionClosed was emitted: flush output, close the socket."""
        return self._state is ConnectionState.CLOSED

    @property
    def reading_paused(self) -> bool:
        """True while the broker decides on connection.open: the shell may stop reading."""
        return self._state is ConnectionState.OPEN_PENDING

    @property
    def user(self) -> str:
        """The authenticated user ("" until connection.start-ok is accepted)."""
        return self._handshake.user

    @property
    def login_user(self) -> str:
        """The user name the client gave in connection.start-ok, even if refused."""
        return self._handshake.login_user

    @property
    def virtual_host(self) -> str:
        return self._handshake.vhost

    @property
    def auth_mechanism(self) -> str:
        return self._handshake.mechanism

    @property
    def tuning(self) -> Tuning:
        """channel_max / frame_max / heartbeat_s in force (frame_max 4096 before tune-ok)."""
        return self._handshake.tuning

    @property
    def client_properties(self) -> common.FieldTable:
        return self._handshake.client_properties

    @property
    def client_capabilities(self) -> common.FieldTable:
        return self._handshake.client_capabilities

    @property
    def open_channels(self) -> frozenset[int]:
        """Channels that are open and not closing."""
        return self._channels.open_numbers()

    @property
    def blocked(self) -> bool:
        """True between a sent connection.blocked and connection.unblocked."""
        return self._blocked

    @property
    def pending_output_bytes(self) -> int:
        return len(self._out)

    # -- input and output -------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview, now_ms: int) -> None:
        """Feed bytes from the socket. Never raises for bad input; see next_events()."""
        self._timers.advance(now_ms)
        if self._state is ConnectionState.CLOSED:
            return
        if data:
            self._timers.received()
            self._inbox.feed(data)
        self._process()

    def next_events(self) -> list[Event]:
        """Events queued since the last call, oldest first."""
        events = list(self._events)
        self._events.clear()
        return events

    def data_to_send(self) -> bytes:
        """Drain the output buffer."""
        return self._out.drain()

    # -- time -------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        """When ``tick`` must be called next, or None if no timer runs."""
        return self._timers.next_deadline(self._state)

    def tick(self, now_ms: int) -> None:
        """Send the heartbeats due; apply the timeouts (see :mod:`api.amqp.timers`)."""
        self._timers.advance(now_ms)
        if self._state is ConnectionState.CLOSED:
            return
        if self._state is ConnectionState.CLOSING and self._timers.close_wait_over():
            self._finish(False, *self._close_reason)
        elif (gone := self._timers.check(self._state)) is not None:
            self._abandon(gone)

    # -- broker commands --------------------------------------------------------------

    def accept_open(self) -> bool:
        """Answer OpenRequested with open-ok. False if the connection died meanwhile."""
        if self._state in ENDING_STATES:
            return False
        if self._state is not ConnectionState.OPEN_PENDING:
            raise RuntimeError(f"accept_open() in state {self._state.value}")
        self._out.method(0, commands.Connection.OpenOk())
        self._state = ConnectionState.OPEN
        self._process()
        return True

    def refuse_open(self, reply_code: int, reply_text: str) -> bool:
        """Answer OpenRequested with connection.close (530 "NOT_ALLOWED - vhost x not found")."""
        if self._state in ENDING_STATES:
            return False
        if self._state is not ConnectionState.OPEN_PENDING:
            raise RuntimeError(f"refuse_open() in state {self._state.value}")
        self._send_close(reply_code, reply_text, *OPEN_IDS)
        return True

    def send_method(self, channel: int, method: base.Frame) -> bool:
        """A content-less method on an open channel. False if the channel is not open."""
        kind = type(method)
        if channel == 0 or frame_ids(method)[0] == CONNECTION_CLASS_ID:
            raise ValueError("channel 0 and connection methods belong to the machine")
        if kind in MACHINE_ONLY_METHODS:
            raise ValueError(f"{method_name(method)} is sent by the machine (use close_channel)")
        if kind in CONTENT_METHODS:
            raise ValueError(f"{method_name(method)} carries content: use send_content")
        if not self._can_send(channel):
            return False
        self._out.method(channel, method)
        return True

    def send_content(
        self,
        channel: int,
        method: base.Frame,
        properties: commands.Basic.Properties | bytes,
        body: bytes,
    ) -> bool:
        """basic.deliver / get-ok / return with its content, body in frames <= frame_max.

        `properties` may be pamqp's object or the property flags and list already
        encoded (a stored message goes out without decoding and encoding again).
        """
        if type(method) not in CONTENT_METHODS:
            raise ValueError(f"{method_name(method)} carries no content: use send_method")
        if not self._can_send(channel):
            return False
        self._out.write(encode_content(channel, method, properties, body, self.tuning.frame_max))
        return True

    def send_deliver(self, channel: int, consumer_tag: str, delivery_tag: int,
                     redelivered: bool, exchange: str, routing_key: str, properties: bytes,
                     body: bytes) -> bool:
        """`send_content` of a basic.deliver, from its fields (no pamqp object)."""
        if not self._can_send(channel):
            return False
        data = encode_delivery(channel, consumer_tag, delivery_tag, redelivered, exchange,
                               routing_key, properties, body, self.tuning.frame_max)
        if data is None:  # an unusual field: pamqp's encoder says what is wrong with it
            method = build_method(commands.Basic.Deliver, consumer_tag=consumer_tag,
                                  delivery_tag=delivery_tag, redelivered=redelivered,
                                  exchange=exchange, routing_key=routing_key)
            data = encode_content(channel, method, properties, body, self.tuning.frame_max)
        self._out.write(data)
        return True

    def close_channel(
        self, channel: int, reply_code: int, reply_text: str, class_id: int = 0, method_id: int = 0
    ) -> bool:
        """channel.close; the number is reusable after the client's close-ok.

        A hard (connection) reply code closes the whole connection instead, as
        RabbitMQ does with a hard error raised on a channel.
        """
        if is_connection_error(reply_code):
            return self.close_connection(reply_code, reply_text, class_id, method_id)
        if self._state is not ConnectionState.OPEN:
            return False
        return self._channels.close(channel, reply_code, reply_text, class_id, method_id)

    def close_connection(
        self, reply_code: int, reply_text: str, class_id: int = 0, method_id: int = 0
    ) -> bool:
        """connection.close; ConnectionClosed follows the client's close-ok (or a timeout)."""
        if self._state in ENDING_STATES:
            return False
        if self._state is ConnectionState.AWAITING_HEADER:
            self._finish(False, reply_code, reply_text)
        else:
            self._send_close(reply_code, reply_text, class_id, method_id)
        return True

    def send_blocked(self, reason: str) -> bool:
        """connection.blocked, if the client has the connection.blocked capability."""
        if self._blocked or not self._may_notify_blocking():
            return False
        self._out.method(0, commands.Connection.Blocked(truncate_shortstr(reason)))
        self._blocked = True
        return True

    def pause_heartbeat_monitor(self, paused: bool, now_ms: int) -> None:
        """The shell stops (or resumes) reading this connection, e.g. during an alarm."""
        self._timers.advance(now_ms)
        self._timers.pause_receive_monitor(paused)

    def send_unblocked(self) -> bool:
        """connection.unblocked after a connection.blocked."""
        if not self._blocked or not self._may_notify_blocking():
            return False
        self._out.method(0, commands.Connection.Unblocked())
        self._blocked = False
        return True

    # -- internals: input loop --------------------------------------------------------

    def _process(self) -> None:
        while self._state not in NOT_READING_STATES:
            try:
                if not self._step():
                    break
            except ProtocolError as err:
                if self._state is ConnectionState.CLOSING:  # lost sync while closing
                    self._finish(False, *self._close_reason)
                else:
                    self._fail(err.code, err.text, err.class_id, err.method_id, err.lost_sync)
        self._inbox.compact()

    def _step(self) -> bool:
        if self._state is ConnectionState.AWAITING_HEADER:
            outcome = self._handshake.protocol_header(self._inbox)
            if outcome is not None:
                self._apply(outcome)
            return isinstance(outcome, ConnectionState)
        frame = self._inbox.next_frame(self.tuning.frame_max)
        if frame is None:
            return False
        self._frame(frame)
        return True

    def _frame(self, frame: RawFrame) -> None:
        if self._state is ConnectionState.CLOSING:
            if self._handshake.closing_frame(frame):
                self._finish(False, *self._close_reason)
            return
        check_frame(frame)
        if frame.frame_type == FRAME_HEARTBEAT:
            return
        if frame.channel == 0:
            self._apply(self._handshake.method_frame(self._state, frame))
        elif self._state is ConnectionState.OPEN:
            self._channels.handle_frame(frame)
            self._channels.take_acks(self._inbox)  # the rest of a run of acks, if any
        else:
            raise ProtocolError(
                ReplyCode.UNEXPECTED_FRAME,
                f"frame of type {frame.frame_type} on channel {frame.channel} before the "
                f"connection was open (state {self._state.value})",
            )

    def _apply(self, outcome: ConnectionState | Ending) -> None:
        """Carry out what channel 0 decided."""
        if isinstance(outcome, ConnectionState):
            if outcome is ConnectionState.OPENING:  # tune-ok: the negotiated tuning is in force
                self._channels.limit = self.tuning.channel_max or CHANNEL_NUMBER_MAX
                self._timers.tuned(self.tuning.heartbeat_s)
            self._state = outcome
        elif outcome.how is EndKind.BY_CLIENT:
            self._finish(True, outcome.code, outcome.text)
        elif outcome.how is EndKind.CLOSE:
            self._fail(outcome.code, outcome.text, 0, 0, detail=outcome.detail)
        else:
            self._abandon(outcome.text, outcome.code, outcome.detail)

    def _can_send(self, channel: int) -> bool:
        return self._state is ConnectionState.OPEN and self._channels.is_open(channel)

    def _may_notify_blocking(self) -> bool:
        return (
            self._state is ConnectionState.OPEN
            and self._handshake.client_capabilities.get("connection.blocked") is True
        )

    # -- internals: endings -----------------------------------------------------------

    def _send_close(self, code: int, text: str, class_id: int, method_id: int) -> None:
        text = truncate_shortstr(text)
        self._out.method(0, commands.Connection.Close(code, text, class_id, method_id))
        self._state = ConnectionState.CLOSING
        self._channels.clear()
        self._close_reason = (code, text)
        self._timers.start_close_wait()

    def _fail(
        self,
        code: int,
        text: str,
        class_id: int,
        method_id: int,
        lost_sync: bool = False,
        detail: str = "",
    ) -> None:
        """Close because of the client's error; wait for close-ok unless the stream is lost."""
        self._send_close(code, text, class_id, method_id)
        text = self._close_reason[1]
        self._events.append(ConnectionFailed(code, text, True, detail))
        if lost_sync:
            self._finish(False, code, text)

    def _abandon(self, text: str, code: int = 0, detail: str = "") -> None:
        """End without a connection.close (bad header, timeouts): the shell drops the socket."""
        self._events.append(ConnectionFailed(code, text, False, detail))
        self._finish(False, code, text)

    def _finish(self, by_client: bool, code: int, text: str) -> None:
        self._state = ConnectionState.CLOSED
        self._out.sealed = True
        self._channels.clear()
        self._inbox.clear()
        self._events.append(ConnectionClosed(by_client, code, text))
