"""`ConnectionHandler`: one AMQP client's socket, driving its connection machine.

Read loop of the pure :class:`~api.amqp.connection_machine.AmqpConnection`
(h11 style)::

    read bytes -> machine.receive_data -> events -> broker calls -> machine.send_* -> flush

* Events: ``OpenRequested`` is answered at once (``broker.access.check_vhost``, then
  accept or refuse); ``ChannelOpened`` creates a
  :class:`~api.amqp.channel_session.ChannelSession`, which gets its channel's
  methods and publishes; ``ChannelClosed`` closes it (unacked messages
  requeued); ``ConnectionClosed`` ends the connection.
* Output: the machine buffers; the handler writes ``data_to_send()`` after
  each batch of events, and sessions writing from elsewhere (a queue's pump
  delivering, a publish confirmed) ask for one flush per loop iteration.
* Time: a loop timer calls ``machine.tick`` at ``next_deadline_ms()``
  (heartbeats out, heartbeat / handshake / close-wait timeouts).
* Back-pressure: before each read the loop asks the connection's
  :class:`~api.connection_flow.ConnectionFlow`, which waits while the
  connection's publishes in flight exceed their byte limit (a publisher is
  slowed to the disk's pace), while queues it published to hold it back, while
  a resource alarm blocks it, and while the socket's write buffer is over its
  high-water mark (a client that does not read is not fed more work); while
  the write buffer is high, channels report no prefetch credit, so queues stop
  delivering to it.
* Resource alarms (memory / disk, :mod:`logbroker.resource_alarms`): every
  connection gets connection.blocked (if it has the capability) and those that
  have published are no longer read until connection.unblocked, as RabbitMQ
  does; the heartbeat monitor is paused meanwhile (and while queues hold the
  connection in flow), as RabbitMQ pauses it.
* The end: on ``ConnectionClosed``, end of file or a socket error, every
  channel is closed (its unacked messages requeued), the connection's
  exclusive queues are deleted and the socket is closed.

The machine never raises on bad input, and a failure inside the broker layer
closes that one connection with 541 INTERNAL_ERROR, so no client can take the
server down. Connection ids are ``"<peer host>:<peer port>:<n>"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace

from api.amqp.channel_session import ChannelSession
from api.amqp.connection_context import IN_FLIGHT_UNIT, ConnectionContext
from api.amqp.connection_machine import AmqpConnection
from api.amqp.direct_reply import DirectReplyRegistry
from api.amqp.events import (
    Acks,
    ChannelClosed,
    ChannelMethod,
    ChannelOpened,
    ConnectionClosed,
    ConnectionFailed,
    Event,
    OpenRequested,
    Publish,
)
from api.amqp.handshake import LoginUnavailable
from api.amqp.output_round import OutputRound
from api.amqp.reply_texts import reply_text
from api.amqp.server_properties import ConnectionConfig
from api.connection_flow import ConnectionFlow
from logbroker.broker import Broker
from logbroker.broker_config import Session
from logbroker.connections import ChannelInfo, ConnectionInfo
from logbroker.definitions_loaded import DefinitionsNotLoaded
from logbroker.errors import BrokerError
from logbroker.metadata.reply_codes import ReplyCode
from logbroker.tls_options import peer_user_name
from segments.clock import SYSTEM_CLOCK, Clock

__all__ = ["ConnectionHandler"]

logger = logging.getLogger(__name__)

READ_SIZE = 256 * 1024
WRITE_HIGH_WATER = 4 * 1024 * 1024  # socket write buffer above this: congested
PUBLISH_IN_FLIGHT_LIMIT = 64 * 1024 * 1024  # bytes routed but not yet durable, per connection


class ConnectionHandler:
    """One client connection: socket, connection machine and channel sessions."""

    def __init__(
        self, broker: Broker, config: ConnectionConfig, reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter, serial: int, replies: DirectReplyRegistry | None = None,
        output_round: OutputRound | None = None, clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        peer = writer.get_extra_info("peername")
        self.peer_host: str | None = str(peer[0]) if peer else None
        port = peer[1] if peer else 0
        self._peer_port = int(port)
        self._info: ConnectionInfo | None = None
        self.connection_id = f"{self.peer_host}:{port}:{serial}"
        self._broker = broker
        self._clock = clock
        self._replies = replies or DirectReplyRegistry()
        self._round = output_round or OutputRound()
        self._reader = reader
        self._writer = writer
        self._machine = AmqpConnection(
            replace(config, client_address=self.peer_host or "",
                    certificate_user=peer_user_name(writer.get_extra_info("peercert"),
                                                    config.certificate_login_from,
                                                    config.certificate_login_san_type)),
            self._authenticate, clock.monotonic_ms())
        self._sessions: dict[int, ChannelSession] = {}
        self._ctx: ConnectionContext | None = None
        self._flow = ConnectionFlow({IN_FLIGHT_UNIT: PUBLISH_IN_FLIGHT_LIMIT + 1},  # over it
                                    self.congested, self._output_drained, self._set_state)
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline = 0
        self._flush_scheduled = False
        self._drain_task: asyncio.Task[None] | None = None
        self._finished = False
        self._end_task: asyncio.Future[None] | None = None
        self._end_reason = ""
        self._handling_input = False
        self._after_read: list[Callable[[], None]] = []  # see after_read
        self.task: asyncio.Task[object] | None = None
        writer.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)

    @property
    def opened(self) -> bool:
        """connection.open was accepted (the client logged in and chose a vhost)."""
        return self._ctx is not None

    def _authenticate(self, username: str, password: str | None) -> str | None:
        # The peer host decides RabbitMQ's loopback-only rule for "guest".
        try:
            return self._broker.access.authenticate(username, password, self.peer_host)
        except DefinitionsNotLoaded as error:
            raise LoginUnavailable(error.text) from None

    # -- the read loop -----------------------------------------------------------------

    async def run(self) -> None:
        self.task = asyncio.current_task()
        logger.debug("accepting AMQP connection %s", self.connection_id)
        try:
            # A starting node may not know the users yet: hold the handshake (the
            # client's protocol header waits unread) rather than refuse a valid login.
            await self._broker.definitions_loaded.wait()
            self._process()
            while not self._machine.closed and not self._finished:
                if not await self._flow.wait():
                    break
                data = await self._reader.read(READ_SIZE)
                if not data:
                    break
                if self._info is not None:
                    self._info.recv_oct += len(data)
                self._machine.receive_data(data, self._clock.monotonic_ms())
                self._process()
        except (ConnectionError, OSError) as err:
            self._end_reason = self._end_reason or f"socket error: {err}"
        except Exception:  # a bug: drop this connection, keep serving the others
            logger.exception("connection %s: unexpected error", self.connection_id)
            self._end_reason = "internal error"
        finally:
            await self._finish()

    async def _output_drained(self) -> bool:
        """The socket's write buffer is below its high-water mark (the flow's port)."""
        await self._writer.drain()
        return True

    def _set_state(self, state: str) -> None:
        """"running", or why the connection is not read: "flow", "blocked" (RabbitMQ's
        connection states). Silence while not read is not a missed heartbeat."""
        self._machine.pause_heartbeat_monitor(state != "running", self._clock.monotonic_ms())
        if self._info is not None:
            self._info.state = state

    def resource_alarm(self, active: bool, reason: str) -> None:
        """A memory or disk alarm went on or off: connection.blocked / unblocked.

        As RabbitMQ does, every connection is told (if it has the capability) and
        connections that publish stop being read until the alarm clears.
        """
        self._flow.alarm(active)
        if active:
            self._machine.send_blocked(reason)
        else:
            self._machine.send_unblocked()
        self.notify_output()

    # -- events ---------------------------------------------------------------------------

    def _process(self) -> None:
        """Dispatch every queued event, run what they left for the end of the read
        (publish batches, acks), then flush and re-arm the timer."""
        self._handling_input = True
        self._round.active = True
        try:
            while events := self._machine.next_events():
                for event in events:
                    try:
                        self._dispatch(event)
                    except Exception:  # a broker-layer bug must not take the server down
                        logger.exception("connection %s: error handling %r",
                                         self.connection_id, event)
                        text = reply_text(ReplyCode.INTERNAL_ERROR,
                                          "internal error in the broker")
                        self._machine.close_connection(ReplyCode.INTERNAL_ERROR, text)
        finally:
            self._handling_input = False
            waiting, self._after_read = self._after_read, []
            try:
                for work in waiting:
                    work()
            finally:
                self._round.end()  # the consumers this read delivered to, first
        self._flush()
        if self._machine.closed:
            self._end_soon()
        else:
            self._arm_timer()

    def _dispatch(self, event: Event) -> None:
        if isinstance(event, ChannelMethod | Acks | Publish):
            if isinstance(event, Publish):
                self._flow.published()
            session = self._sessions.get(event.channel)
            if session is not None:
                session.handle(event)
        elif isinstance(event, ChannelOpened):
            assert self._ctx is not None  # channels open only after accept_open
            self._sessions[event.channel] = ChannelSession(
                self._ctx, event.channel, self._forget_channel
            )
            if self._info is not None:
                self._info.channels = len(self._sessions)
        elif isinstance(event, ChannelClosed):
            closed = self._sessions.pop(event.channel, None)
            if closed is not None:
                closed.close()
            if self._info is not None:
                self._info.channels = len(self._sessions)
        elif isinstance(event, OpenRequested):
            self._open(event)
        elif isinstance(event, ConnectionFailed):
            detail = f" ({event.detail})" if event.detail else ""
            self._end_reason = f"{event.reply_text or 'dropped'}{detail}"
        elif isinstance(event, ConnectionClosed):
            reason = event.reply_text if not event.by_client else "closed by the client"
            self._end_reason = self._end_reason or reason

    def _open(self, event: OpenRequested) -> None:
        try:
            self._broker.access.check_vhost(event.user, event.virtual_host)
        except BrokerError as err:
            self._machine.refuse_open(err.reply_code, err.reply_text)
            return
        refusal = self._broker.connections.refusal(
            event.virtual_host,
            self._broker.state.vhost_limit(event.virtual_host, "max-connections"))
        if refusal is not None:
            logger.warning("connection %s: %s", self.connection_id, refusal)
            self._machine.refuse_open(ReplyCode.NOT_ALLOWED,
                                      reply_text(ReplyCode.NOT_ALLOWED, refusal))
            return
        self._ctx = ConnectionContext(
            broker=self._broker,
            machine=self._machine,
            session=Session(self.connection_id, event.user, event.virtual_host),
            notify_output=self.notify_output,
            after_read=self.after_read,
            congested=self.congested,
            flow=self._flow,
            cancel_notify=self._machine.client_capabilities.get("consumer_cancel_notify")
            is True,
            direct_reply=self._replies,
        )
        self._machine.accept_open()
        self._info = ConnectionInfo(
            self.connection_id, "AMQP 0-9-1", self.peer_host or "", self._peer_port,
            event.user, event.virtual_host, auth_mechanism=self._machine.auth_mechanism,
            ssl=self._writer.get_extra_info("ssl_object") is not None,
            channel_infos=self._channel_infos, close=self._close_by_operator,
            client_properties=dict(self._machine.client_properties),
            frame_max=self._machine.tuning.frame_max,
            channel_max=self._machine.tuning.channel_max,
            heartbeat_s=self._machine.tuning.heartbeat_s)
        self._broker.connections.add(self._info)
        alarms = self._broker.resources.alarms
        if alarms.active:
            self.resource_alarm(True, alarms.reason)

    def _channel_infos(self) -> list[ChannelInfo]:
        return [session.info() for session in self._sessions.values()]

    def _close_by_operator(self, reason: str) -> None:
        """Closed through the management API (RabbitMQ: 320 CONNECTION_FORCED - reason)."""
        self._end_reason = f"closed by an operator: {reason}"
        self.force_close(reply_text(ReplyCode.CONNECTION_FORCED, reason))

    def _forget_channel(self, number: int) -> None:
        self._sessions.pop(number, None)
        if self._info is not None:
            self._info.channels = len(self._sessions)

    # -- output ---------------------------------------------------------------------------

    def after_read(self, work: Callable[[], None]) -> None:
        """Run `work` once this read is handled, before its output is flushed (a
        channel's publish batch: all of the read's publishes in one batch, with no loop
        iteration before the write; its acks, settled together), or on the next
        iteration when it comes from outside input handling."""
        if self._handling_input:
            self._after_read.append(work)
        else:
            self._loop.call_soon(work)

    def notify_output(self) -> None:
        """Sessions wrote to the machine: flush once, when the read being handled (any
        connection's: see OutputRound) is done, or at the end of this loop iteration."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            if self._round.active:
                self._round.add(self._flush)
            else:
                self._loop.call_soon(self._flush)

    def congested(self) -> bool:
        """Output waiting (in the machine and the socket) is over the high-water mark."""
        waiting = self._writer.transport.get_write_buffer_size()
        return waiting + self._machine.pending_output_bytes > WRITE_HIGH_WATER

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._stale_deliveries():
            return
        data = self._machine.data_to_send()
        if not data or self._writer.is_closing():
            return
        self._writer.write(data)
        if self._info is not None:
            self._info.send_oct += len(data)
        if self._machine.closed:
            self._end_soon()
        elif not self.congested():
            self._flushed()
        elif self._drain_task is None:
            self._drain_task = asyncio.ensure_future(self._resume_after_drain())

    def _stale_deliveries(self) -> bool:
        """Whether deliveries made under the leader lease would be written after it
        lapsed (the process was paused between making and writing them): a new leader
        may have redelivered them, flagged, meanwhile. They are not written; the
        connection is dropped, so its unacked messages are redelivered, flagged."""
        ctx = self._ctx
        if ctx is None or not ctx.deliveries_pending:
            return False
        ctx.deliveries_pending = False
        if self._broker.lease_holds():
            return False
        logger.warning("connection %s: deliveries made before the leader lease lapsed are "
                       "not written; the connection is dropped", self.connection_id)
        self.abort()
        return True

    async def _resume_after_drain(self) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.drain()
        self._drain_task = None
        self._flushed()
        for session in list(self._sessions.values()):
            session.resume()  # channels have credit again: let their queues deliver

    def _flushed(self) -> None:
        for session in list(self._sessions.values()):
            session.output_flushed()

    # -- time -----------------------------------------------------------------------------

    def _arm_timer(self) -> None:
        deadline = self._machine.next_deadline_ms()
        if deadline is None:
            self._cancel_timer()
            return
        if self._timer is not None and self._timer_deadline <= deadline:
            return  # the armed timer fires first; it re-arms for later deadlines
        self._cancel_timer()
        delay_s = max(0, deadline - self._clock.monotonic_ms() + 1) / 1000
        self._timer = self._loop.call_later(delay_s, self._on_timer)
        self._timer_deadline = deadline

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _on_timer(self) -> None:
        self._timer = None
        self._machine.tick(self._clock.monotonic_ms())
        self._process()

    # -- the end --------------------------------------------------------------------------

    def force_close(self, text: str) -> None:
        """Close the connection from the server side (shutdown)."""
        if self._machine.close_connection(ReplyCode.CONNECTION_FORCED, text):
            self._process()
        else:
            self._end_soon()

    def abort(self) -> None:
        """Drop the socket without a goodbye (the client did not answer in time)."""
        self._writer.transport.abort()

    def _end_soon(self) -> None:
        if not self._finished and self._end_task is None:
            self._end_task = asyncio.ensure_future(self._finish())

    async def _finish(self) -> None:
        """Close every channel, delete exclusive queues, close the socket. Idempotent."""
        if self._finished:
            return
        self._finished = True
        self._broker.connections.remove(self.connection_id)
        self._flow.close()  # a read loop waiting (an alarm, a hold) must see the end
        self._cancel_timer()
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.close()
        if self._ctx is not None:
            try:
                await self._broker.definitions.delete_exclusive_queues(self.connection_id)
            except BrokerError:
                logger.exception("connection %s: deleting exclusive queues", self.connection_id)
        data = self._machine.data_to_send()
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            if data and not self._writer.is_closing():
                self._writer.write(data)
            self._writer.close()
            await self._writer.wait_closed()
        if self._drain_task is not None:
            self._drain_task.cancel()
        # One line per connection (RabbitMQ logs each): more would flood a busy node's log.
        login = self._machine.login_user
        who = f"user '{login}'" if login else "before login"
        logger.info("AMQP connection %s (%s) ended: %s", self.connection_id, who,
                    self._end_reason or "the client went away")
