"""One WebSocket connection on `/ws`: client frames in, broker calls, frames out.

Theory of operation
-------------------
The route authenticates the upgrade and hands the socket to a
:class:`WsSession`, which plays the part of an AMQP connection with a single
channel (its ``channel_key`` is the connection id):

* a *reader* task takes one client frame at a time and dispatches it by
  ``op``; a frame it cannot accept (bad JSON, unknown op, bad field, a
  refusal from the broker) is answered by an ``error`` frame and the socket
  stays open;
* a *writer* task drains the one bounded outbox (:mod:`api.http.ws_outbox`)
  that every outgoing frame goes through, in order;
* publishes run concurrently and are answered frame by frame, in order
  (:mod:`api.http.ws_publish`); the reader asks the socket's
  :class:`~api.connection_flow.ConnectionFlow` before each frame, and stops
  reading while too many publishes are unanswered, while a queue holds this
  publisher back, or while the outbox is over its high-water mark, so a
  client that floods or does not read backs up into TCP;
* the session is the ``DeliverySink`` of its consumers: queues push
  deliveries synchronously, tagged from one :class:`DeliveryTags` counter per
  socket; the queue core enforces each consumer's prefetch and the session's
  ``credit`` carries the outbox's back-pressure;
* replays are tasks of their own (:mod:`api.http.ws_replay`).

When either task ends (the client left, a send failed) the session closes:
replays stop, consumers are cancelled and the deliveries left unacked go back
to their queues, to be redelivered with ``redelivered=true``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from fastapi import WebSocket

from api.amqp.channel_tx import Settlement, apply_settlement
from api.amqp.delivery_tags import DeliveryTags, Unacked, UnknownDeliveryTag
from api.connection_flow import ConnectionFlow
from api.http.api_context import ApiContext
from api.http.auth import Principal
from api.http.http_errors import ApiError, status_of
from api.http.http_publish import check_not_blocked
from api.http.message_codec import message_json
from api.http.routes.replay import replay_shell, start_offset
from api.http.ws_frames import (
    Frame,
    FrameError,
    Ref,
    error_frame,
    frame_ref,
    parse_frame,
    parse_name,
    parse_publish,
    parse_replay,
    parse_settle,
    parse_subscribe,
)
from api.http.ws_outbox import SMALL_FRAME_BYTES, Outbox
from api.http.ws_publish import PAUSE_AT, PublishChain
from api.http.ws_publish_build import build_frame_messages
from api.http.ws_replay import Replays, stopped_frame
from logbroker.broker_config import Session
from logbroker.consumer_resubscription import ConsumeRequest, ConsumerMoves, SinkConsumer
from logbroker.errors import BrokerError
from logbroker.message import Message
from logbroker.queue.queue_type import QueueType

__all__ = ["WsSession"]

logger = logging.getLogger(__name__)

MAX_CONSUMERS = 1024  # per socket
SERVER_ERROR = 1011  # close code when our side failed (a send, the outbox), not the client
# Closed by an operator (DELETE /api/connections/{name}): AMQP's 320 CONNECTION_FORCED.
CLOSE_FORCED = 4320
MAX_CLOSE_REASON_BYTES = 123  # a close frame's reason must fit in a control frame
_CLIENT_ERRORS = (FrameError, ApiError, UnknownDeliveryTag, BrokerError)
Handler = Callable[[Frame], Awaitable[None]]


ClientError = FrameError | ApiError | UnknownDeliveryTag | BrokerError


def error_of(error: ClientError, ref: Ref) -> Frame:
    """The `error` frame for a refusal raised while handling a client frame."""
    if isinstance(error, FrameError):
        return error_frame(error.status, error.reason,
                           error.ref if error.ref is not None else ref, error.field)
    if isinstance(error, ApiError):
        return error_frame(error.status, error.reason, ref, error.field)
    if isinstance(error, UnknownDeliveryTag):
        return error_frame(400, str(error), ref)  # AMQP's 406 PRECONDITION_FAILED
    return error_frame(status_of(error), error.text, ref)


class WsSession:
    """The broker side of one WebSocket (implements ``DeliverySink``)."""

    def __init__(self, ctx: ApiContext, socket: WebSocket, who: Principal, vhost: str,
                 connection_id: str) -> None:
        self._ctx = ctx
        self._broker = ctx.broker
        self._socket = socket
        self._who = who
        self._session = Session(connection_id, who.user, vhost)
        self._outbox = Outbox(socket.send_text, self._resume)
        self._flow = ConnectionFlow(PAUSE_AT, lambda: not self._outbox.has_room(),
                                    self._outbox.wait_room, self._show_state)
        self._publishes = PublishChain(ctx.broker, vhost, self._outbox, self._flow,
                                       connection_id)
        self._replays = Replays(self._outbox)
        self._tags: DeliveryTags[QueueType] = DeliveryTags()
        self._consumers: dict[str, SinkConsumer] = {}
        self._moves = ConsumerMoves(ctx.broker, self._session, self, self._consumers,
                                    lambda: self.closed, self._tell_cancelled)
        self._queues_used: set[str] = set()  # where unacked deliveries may be left
        self.closed = False
        self._client_left = False
        self._forced: asyncio.Future[None] | None = None  # the operator's close, once sent
        self._handlers: dict[str, Handler] = {
            "publish": self._publish, "subscribe": self._subscribe, "ack": self._ack,
            "nack": self._nack, "reject": self._reject, "cancel": self._cancel,
            "replay": self._replay, "stop_replay": self._stop_replay,
        }

    @property
    def _vhost(self) -> str:
        return self._session.vhost

    def _show_state(self, state: str) -> None:
        """"flow" while queues hold this socket's publishes back, as RabbitMQ shows a
        connection in flow (/api/connections)."""
        info = self._broker.connections.get(self.channel_key)
        if info is not None:
            info.state = state

    # -- DeliverySink ---------------------------------------------------------------------

    @property
    def channel_key(self) -> str:
        return self._session.connection_id

    def deliver(self, queue: str, consumer_tag: str | None, offset: int, redelivered: bool,
                message: Message) -> None:
        consumer = self._consumers.get(consumer_tag or "")
        if self.closed or consumer is None:
            # The shell forgets a closed socket's consumers before it requeues, so this
            # should not happen; if it did, the message must not stay with a dead socket.
            self._give_back(self._broker.queue(self._vhost, queue), offset)
            return
        entry = None if consumer.no_ack else Unacked(consumer.endpoint, offset, consumer_tag)
        tag = self._tags.issue(entry)
        frame: Frame = {"op": "deliver", "consumer_tag": consumer_tag, "delivery_tag": tag,
                        "queue": queue, "offset": offset, "redelivered": redelivered}
        frame.update(message_json(message))
        frame.pop("payload_bytes", None)
        if not self._outbox.push(frame, SMALL_FRAME_BYTES + len(frame["payload"])) \
                and entry is not None:
            self._tags.take(tag, multiple=False)
            self._give_back(consumer.endpoint, offset)

    def consumer_cancelled(self, queue: str, consumer_tag: str,
                           leader_moved: bool = False) -> None:
        """The queue went away, or its leader moved and the consumer cannot follow or
        asked for x-cancel-on-ha-failover: tell the client its consumer is gone."""
        self._moves.consumer_gone(consumer_tag, leader_moved)

    def _tell_cancelled(self, consumer_tag: str) -> None:
        self._outbox.push({"op": "cancelled", "consumer_tag": consumer_tag})

    def credit(self) -> int | None:
        return 0 if self.closed else self._outbox.credit()

    def _resume(self) -> None:
        """The outbox drained: let the queues that ran out of credit deliver again, and
        the publish answers that waited for room go on."""
        self._publishes.resume()
        for shell in {id(c.endpoint): c.endpoint for c in self._consumers.values()}.values():
            shell.schedule_pump()

    @staticmethod
    def _give_back(shell: QueueType | None, offset: int) -> None:
        if shell is not None and not shell.closed:
            shell.reject([offset], requeue=True)

    # -- the connection's life --------------------------------------------------------------

    async def run(self) -> None:
        """Serve the socket until the client leaves or it fails; then clean up."""
        reader = asyncio.ensure_future(self._read_loop())
        writer = asyncio.ensure_future(self._outbox.run())
        try:
            await asyncio.wait([reader, writer], return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.close()
            for task in (reader, writer):
                task.cancel()
            await asyncio.wait([reader, writer])
        if not reader.cancelled() and reader.exception() is not None:
            logger.error("WebSocket %s: reader failed", self.channel_key,
                         exc_info=reader.exception())
        if not self._client_left and self._forced is None:  # our side failed: still open?
            with contextlib.suppress(Exception):
                await self._socket.close(SERVER_ERROR, "internal error")

    def force_close(self, reason: str) -> None:
        """Closed by an operator: close code 4320 with `reason`; the client's answer
        ends the read loop, and `run` cleans up as for any end."""
        if self._forced is None:
            short = reason.encode()[:MAX_CLOSE_REASON_BYTES].decode(errors="ignore")
            self._forced = asyncio.ensure_future(self._send_close(CLOSE_FORCED, short))

    async def _send_close(self, code: int, reason: str) -> None:
        with contextlib.suppress(Exception):  # the client may have gone already
            await self._socket.close(code, reason)

    def close(self) -> None:
        """Stop replays, cancel consumers, requeue every unacked delivery. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self._flow.close()
        self._publishes.close()
        self._outbox.close()
        self._replays.close()
        self._tags.take_all()
        self._consumers.clear()
        try:
            self._broker.consuming.channel_closed(self._vhost, self.channel_key,
                                     self._queues_used)
        except Exception:  # the broker may be shutting down under us
            logger.exception("WebSocket %s: requeueing on close", self.channel_key)

    async def _read_loop(self) -> None:
        # Reading waits for room: no more publishes than the limit, no publisher a queue
        # holds, no reply into a full outbox.
        while not self.closed:
            if not await self._flow.wait():
                return
            message = await self._socket.receive()
            if message["type"] == "websocket.disconnect":
                self._client_left = True
                return
            text = message.get("text")
            if text is None:
                self._outbox.push(error_frame(400, "frames must be JSON text frames", None))
                continue
            await self._handle(text)

    async def _handle(self, text: str) -> None:
        ref: Ref = None
        try:
            frame = parse_frame(text)
            ref = frame_ref(frame)
            handler = self._handlers.get(frame["op"])
            if handler is None:
                raise FrameError(400, f"unknown op '{frame['op']}'", "op")
            await handler(frame)
        except _CLIENT_ERRORS as error:
            self._outbox.push(error_of(error, ref))
        except Exception:
            logger.exception("WebSocket %s: error handling a frame", self.channel_key)
            self._outbox.push(error_frame(500, "internal error", ref))

    # -- publishing ---------------------------------------------------------------------------

    async def _publish(self, frame: Frame) -> None:
        try:
            publish = parse_publish(frame)
        except FrameError as error:
            # Malformed as a whole: nothing published; the error keeps the frame's place.
            self._publishes.submit_error(error_of(error, frame_ref(frame)))
            return
        try:
            check_not_blocked(self._broker)
        except ApiError as error:  # every message of the frame is refused
            self._publishes.submit(publish.ids, [error.reason] * len(publish.ids))
            return
        self._publishes.submit(
            publish.ids, build_frame_messages(self._broker, self._session, publish))

    # -- consuming ------------------------------------------------------------------------------

    async def _subscribe(self, frame: Frame) -> None:
        request = parse_subscribe(frame)
        if request.consumer_tag in self._consumers:
            raise FrameError(400, f"consumer tag '{request.consumer_tag}' is in use on this "
                             "connection", "consumer_tag")
        if len(self._consumers) >= MAX_CONSUMERS:
            raise FrameError(400, f"at most {MAX_CONSUMERS} consumers per connection")
        tag, endpoint = await self._broker.consuming.consume(
            self._session, request.queue, self,
            consumer_tag=request.consumer_tag, no_ack=request.no_ack,
            prefetch_count=request.prefetch, arguments=request.arguments)
        self._consumers[tag] = SinkConsumer(endpoint, ConsumeRequest(
            request.queue, tag, request.no_ack, prefetch_count=request.prefetch,
            arguments=dict(request.arguments or {})))
        self._queues_used.add(request.queue)
        # Before the queue's pump runs (a loop iteration later): deliveries follow this reply.
        self._outbox.push({"op": "subscribed", "consumer_tag": tag})
        endpoint.schedule_pump()

    async def _cancel(self, frame: Frame) -> None:
        tag = parse_name(frame, "consumer_tag")
        consumer = self._consumers.pop(tag, None)
        if consumer is not None:
            self._broker.consuming.cancel(self._session, consumer.endpoint.name, tag)
        # Unknown tags are answered too, as AMQP's basic.cancel: the queue may have
        # been deleted (and the consumer cancelled) while this frame was on its way.
        self._outbox.push({"op": "cancelled", "consumer_tag": tag})

    async def _ack(self, frame: Frame) -> None:
        request = parse_settle(frame)
        taken = self._tags.take(request.delivery_tag, request.multiple)
        apply_settlement(self._broker, self._vhost, Settlement(taken, ack=True))

    async def _nack(self, frame: Frame) -> None:
        request = parse_settle(frame)
        taken = self._tags.take(request.delivery_tag, request.multiple)
        apply_settlement(self._broker, self._vhost,
                         Settlement(taken, ack=False, requeue=request.requeue))

    async def _reject(self, frame: Frame) -> None:
        request = parse_settle(frame, allow_multiple=False)
        taken = self._tags.take(request.delivery_tag, multiple=False)
        apply_settlement(self._broker, self._vhost,
                         Settlement(taken, ack=False, requeue=request.requeue))

    # -- replay -----------------------------------------------------------------------------------

    async def _replay(self, frame: Frame) -> None:
        request = parse_replay(frame)
        shell = replay_shell(self._ctx, self._who, self._vhost, request.queue)
        offset = start_offset(shell, request.from_offset, request.from_timestamp)
        broker, vhost = self._broker, self._vhost

        def alive() -> bool:
            return not shell.closed and broker.queue(vhost, shell.name) is shell

        self._replays.start(request.subscription, shell, offset, request.to_offset,
                            request.follow, alive)

    async def _stop_replay(self, frame: Frame) -> None:
        subscription = parse_name(frame, "subscription")
        await self._replays.stop(subscription)
        # Answered for finished or unknown subscriptions too: a replay without follow
        # may have ended on its own while this frame was on its way.
        self._outbox.push(stopped_frame(subscription))
