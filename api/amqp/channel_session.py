"""One open AMQP channel on top of the broker: methods in, broker calls, answers out.

Theory of operation
-------------------
The connection shell creates a :class:`ChannelSession` on ``ChannelOpened``
and hands it every ``ChannelMethod`` and ``Publish`` of its channel; on
``ChannelClosed`` (or when the session closes the channel itself) it calls
:meth:`ChannelSession.close`. The session is the broker's ``DeliverySink`` for
every consumer it creates, so queues push basic.deliver through it.

* Definitions (exchange.* / queue.*) go to :mod:`api.amqp.channel_definitions`.
* Publishes are checked at once (``check_publish``) and handed to the
  channel's :class:`~api.amqp.publish_pipeline.PublishPipeline`, which runs
  them concurrently and answers (basic.return, confirms) in publish order.
* Deliveries and basic.get-ok take the channel's next delivery tag; unacked
  ones are remembered in :class:`~api.amqp.delivery_tags.DeliveryTags` as
  (queue shell, offset), and acks / nacks / rejects settle them on the shell.
* Prefetch: basic.qos ``global=false`` sets the prefetch of consumers created
  afterwards (the queue core enforces it); ``global=true`` limits the whole
  channel, which the queues ask for through :meth:`credit` (RabbitMQ's
  meaning since 3.3). Credit is also 0 while the socket is congested, and
  at most :data:`FLOW_BATCH` deliveries go out between two flushes of the
  socket, so a queue with a deep backlog and a consumer without prefetch does
  not read the backlog into memory in one pump (no-ack consumers excepted:
  the queue core gives them no credit limit).
* Acks, nacks, rejects and recover go to the session's
  :class:`~api.amqp.channel_settlement.ChannelSettlement`.
* Transactions (:class:`~api.amqp.channel_tx.ChannelTransaction`) buffer
  publishes and settlements; tx.commit starts the publishes, settles, and
  answers commit-ok once the publishes are durable. Until then the channel's
  later methods wait in a backlog, so replies keep the order of requests.
* Ordering with publishes: publishes are routed a moment after they arrive
  (in their task's first step), so any other method (except ack / nack /
  reject) that arrives while publishes are unanswered waits in the same
  backlog until they are. A channel's own publishes are thus routed before a
  later binding change and visible to its later basic.get or queue.declare
  count, as with RabbitMQ's channel process.
* Direct reply-to (``amq.rabbitmq.reply-to``) is :mod:`api.amqp.direct_reply`.

Errors: a :class:`BrokerError` (also raised here for channel-level rules)
closes the channel with its reply code, text and the failing method's ids, or
the connection for a hard error. Closing requeues everything the channel left
unacked (``Consuming.channel_closed``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from pamqp import base, commands

from api.amqp.channel_definitions import DEFINITION_METHODS, ChannelDefinitions
from api.amqp.channel_settlement import ChannelSettlement
from api.amqp.channel_table import frame_ids
from api.amqp.channel_tx import ChannelTransaction, Settlement, apply_settlement
from api.amqp.connection_context import ConnectionContext
from api.amqp.delivery_tags import DeliveryTags, Unacked, UnknownDeliveryTag
from api.amqp.direct_reply import PSEUDO_QUEUE, ReplyEndpoint
from api.amqp.events import Acks, ChannelMethod, Publish
from api.amqp.frame_encoding import build_method
from api.amqp.publish_pipeline import PublishPipeline
from logbroker.connections import ChannelInfo
from logbroker.consumer_resubscription import ConsumeRequest, ConsumerMoves, SinkConsumer
from logbroker.definitions import server_generated_name
from logbroker.errors import NOT_IMPLEMENTED, PRECONDITION_FAILED, BrokerError
from logbroker.message import Message
from logbroker.message_stats import ChannelCounters
from logbroker.publish_checks import check_publish
from logbroker.queue.queue_type import QueueType

__all__ = ["ChannelSession"]

NOT_ALLOWED = 530
INTERNAL_ERROR = 541
logger = logging.getLogger(__name__)
ChannelEvent = ChannelMethod | Acks | Publish
FLOW_BATCH = 64  # deliveries per channel between two socket flushes
#: Methods that need not wait for the channel's earlier publishes: settling
#: deliveries is independent of them, and delaying acks would stall consumers.
_UNORDERED: frozenset[type[base.Frame]] = frozenset(
    {commands.Basic.Ack, commands.Basic.Nack, commands.Basic.Reject}
)


class ChannelSession:
    """The broker side of channel ``number`` (implements ``DeliverySink``)."""

    def __init__(
        self, ctx: ConnectionContext, number: int, on_closed: Callable[[int], None]
    ) -> None:
        self.number = number
        self.closed = False
        self._ctx = ctx
        self._key = f"{ctx.session.connection_id}:{number}"
        self._on_closed = on_closed
        self._definitions = ChannelDefinitions(ctx.broker, ctx.session, ctx.direct_reply.exists)
        self._reply = ReplyEndpoint(ctx.direct_reply, self._deliver_reply)
        self._tags: DeliveryTags[QueueType] = DeliveryTags()
        self._consumers: dict[str, SinkConsumer] = {}
        self._moves = ConsumerMoves(ctx.broker, ctx.session, self, self._consumers,
                                    lambda: self.closed, self._tell_cancelled)
        self._queues_used: set[str] = set()
        self._prefetch_count = 0  # for consumers created from now on
        self._global_prefetch = 0  # channel-wide; 0: no limit
        self._since_flush = 0  # deliveries since the shell last flushed our output
        self.counters = ChannelCounters()  # for the management API
        self._pipeline = PublishPipeline(ctx, number, self.counters)
        self._tx = ChannelTransaction(self, self._pipeline, self._tags, self._settle)
        self._settlement = ChannelSettlement(self._tags, self._tx, self._settle,
                                             ctx.after_read, self.send, self.fail)
        # Set while earlier publishes (or a tx.commit) are unanswered: later events wait.
        self._backlog: deque[ChannelEvent] | None = None
        self._tasks: set[asyncio.Future[base.Frame | None]] = set()
        self._handlers: dict[type[base.Frame], Callable[[Any], None]] = {
            commands.Basic.Qos: self._qos,
            commands.Basic.Consume: self._consume,
            commands.Basic.Cancel: self._cancel,
            commands.Basic.Get: self._get,
            commands.Basic.Ack: self._settlement.ack,
            commands.Basic.Nack: self._settlement.nack,
            commands.Basic.Reject: self._settlement.reject,
            commands.Basic.Recover: self._settlement.recover,
            commands.Basic.RecoverAsync: self._settlement.recover,
            commands.Tx.Select: self._tx.select,
            commands.Tx.Commit: self._tx.commit,
            commands.Tx.Rollback: self._tx.rollback,
            commands.Confirm.Select: self._confirm_select,
        }

    def info(self) -> ChannelInfo:
        """This channel as the management API lists it."""
        return ChannelInfo(self.number, self._prefetch_count, self._global_prefetch,
                           len(self._tags), len(self._consumers), self._pipeline.confirming,
                           self._tx.open, self.counters)

    # -- DeliverySink ---------------------------------------------------------------

    @property
    def channel_key(self) -> str:
        return self._key

    def deliver(
        self, queue: str, consumer_tag: str | None, offset: int, redelivered: bool,
        message: Message,
    ) -> None:
        consumer = self._consumers.get(consumer_tag or "")
        if self.closed or consumer is None:
            # The shell forgets a channel's consumers before it requeues, so this should
            # not happen; if it did, the message must not stay owned by a dead channel.
            shell = self._ctx.broker.queue(self._ctx.session.vhost, queue)
            if shell is not None:
                shell.reject([offset], requeue=True)
            return
        entry = None if consumer.no_ack else Unacked(consumer.endpoint, offset, consumer_tag)
        tag = self._tags.issue(entry)
        self.counters.deliver += 1
        self.counters.redeliver += redelivered
        self._since_flush += 1
        self._ctx.deliveries_pending = True
        self._ctx.machine.send_deliver(self.number, consumer_tag or "", tag, redelivered,
                                       message.exchange, message.routing_key,
                                       message.encoded_properties(), message.body)
        self._ctx.notify_output()

    def _deliver_reply(self, consumer_tag: str, message: Message) -> None:
        """A direct reply-to reply for this channel's reply consumer (no-ack)."""
        if self.closed:
            return
        method = build_method(
            commands.Basic.Deliver, consumer_tag=consumer_tag, delivery_tag=self._tags.issue(None),
            redelivered=False, exchange=message.exchange, routing_key=message.routing_key,
        )
        self._ctx.machine.send_content(self.number, method, message.properties, message.body)
        self._ctx.notify_output()

    def consumer_cancelled(self, queue: str, consumer_tag: str,
                           leader_moved: bool = False) -> None:
        """The queue went away, or its leader moved and the consumer cannot follow or
        asked for x-cancel-on-ha-failover: basic.cancel to the client."""
        self._moves.consumer_gone(consumer_tag, leader_moved)

    def _tell_cancelled(self, consumer_tag: str) -> None:
        if self._ctx.cancel_notify:  # it understands (consumer_cancel_notify)
            self._ctx.machine.send_method(self.number, commands.Basic.Cancel(consumer_tag, True))
            self._ctx.notify_output()

    def credit(self) -> int | None:
        if self._ctx.congested():
            return 0
        room = FLOW_BATCH - self._since_flush
        if self._global_prefetch:
            room = min(room, self._global_prefetch - self._tags.consumer_unacked)
        return max(0, room)

    def output_flushed(self) -> None:
        """The shell wrote our output to an uncongested socket: a new delivery batch may go."""
        starved = self._since_flush >= FLOW_BATCH
        self._since_flush = 0
        if starved:
            self.resume()

    def resume(self) -> None:
        """Credit may have grown (acks, a larger qos, the socket drained): pump our queues."""
        for consumer in self._consumers.values():
            consumer.endpoint.schedule_pump()

    # -- events from the connection --------------------------------------------------

    def handle(self, event: ChannelEvent) -> None:
        """A method or publish on this channel, in arrival order."""
        if self.closed:
            return
        if self._backlog is not None:
            self._backlog.append(event)
            return
        if (isinstance(event, ChannelMethod) and type(event.method) not in _UNORDERED
                and self._pipeline.pending):
            # Earlier publishes first: they must be routed before a binding changes and
            # be visible to this channel's own basic.get, as RabbitMQ's channel does.
            self._backlog = deque([event])
            self._pipeline.barrier(lambda _: self.release_requests())
            return
        self._dispatch(event)

    def hold_requests(self) -> None:
        """Later events wait in the backlog until `release_requests` (TxChannel)."""
        self._backlog = deque()

    def release_requests(self) -> None:
        """Handle the events that waited, in arrival order, until one gates again."""
        waiting, self._backlog = self._backlog or deque(), None
        while waiting and not self.closed:
            if self._backlog is not None:  # gated again: the rest waits behind it
                self._backlog.extend(waiting)
                return
            self.handle(waiting.popleft())

    def _dispatch(self, event: ChannelEvent) -> None:
        if isinstance(event, Acks):
            self._settlement.ack_run(event.acks)
            return
        try:
            if isinstance(event, Publish):
                self._publish(event)
                return
            if type(event.method) is not commands.Basic.Ack:
                self._settlement.flush()  # what follows an ack sees it settled
            if type(event.method) in DEFINITION_METHODS:
                self._run_async(self._definitions.handle(event.method), event.method)
            else:
                self._handlers[type(event.method)](event.method)
        except UnknownDeliveryTag as err:
            self.fail(BrokerError(PRECONDITION_FAILED, str(err)), event.method)
        except BrokerError as err:
            self.fail(err, event.method)

    def _run_async(self, work: Awaitable[base.Frame | None], method: base.Frame) -> None:
        """Run a method that may wait (a definition change committed by the cluster, a
        forwarded get): later events wait in the backlog, so replies keep request order."""
        self.hold_requests()
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(partial(self._async_done, method))

    def _async_done(self, method: base.Frame, task: asyncio.Future[base.Frame | None]) -> None:
        self._tasks.discard(task)
        if task.cancelled() or self.closed:
            if not task.cancelled():
                task.exception()  # retrieved: the channel is gone, nobody to tell
            return
        error = task.exception()
        if isinstance(error, UnknownDeliveryTag):
            error = BrokerError(PRECONDITION_FAILED, str(error))
        if isinstance(error, BrokerError):
            self.fail(error, method)
            return
        if error is not None:
            logger.error("channel %s: %s failed", self._key, type(method).__name__,
                         exc_info=error)
            self.fail(BrokerError(INTERNAL_ERROR, f"internal error: {error}"), method)
            return
        reply = task.result()
        if reply is not None and not getattr(method, "nowait", False):
            self.send(reply)
        self.release_requests()

    def fail(self, err: BrokerError, method: base.Frame) -> None:
        """Close the channel (or, for a hard error, the connection) because of ``err``."""
        class_id, method_id = frame_ids(method)
        if err.connection_error:
            self._ctx.machine.close_connection(err.reply_code, err.reply_text, class_id, method_id)
        else:
            self._ctx.machine.close_channel(
                self.number, err.reply_code, err.reply_text, class_id, method_id
            )
            self.close()
            self._on_closed(self.number)
        self._ctx.notify_output()

    def close(self) -> None:
        """The channel is gone: forget consumers, requeue whatever it left unacked."""
        if self.closed:
            return
        self._settlement.flush()  # acked before the close: settled, not requeued
        self.closed = True
        self._pipeline.close()
        self._backlog = None
        self._tx.close()
        self._tags.take_all()
        self._consumers.clear()
        self._reply.close()
        self._ctx.broker.consuming.channel_closed(
            self._ctx.session.vhost, self._key, self._queues_used
        )

    # -- basic.publish, confirm.select, tx.* ------------------------------------------

    def _publish(self, event: Publish) -> None:
        method = event.method
        check_publish(self._ctx.broker, self._ctx.session, method.exchange, event.properties,
                      len(event.body))
        reply_to = event.properties.reply_to
        self._reply.rewrite_reply_to(event.properties)
        # Stored in wire form: reuse the client's bytes unless we changed a property.
        raw = event.raw_properties if event.properties.reply_to == reply_to else b""
        message = Message(method.exchange, method.routing_key, event.body, event.properties,
                          _encoded_properties=raw or None)
        self.counters.publish += 1
        if self._tx.open:
            self._tx.hold_publish(message, method.mandatory)
        else:
            self._pipeline.submit(message, method.mandatory)

    def _confirm_select(self, method: commands.Confirm.Select) -> None:
        if self._tx.open:
            raise BrokerError(PRECONDITION_FAILED, "cannot switch from tx to confirm mode")
        self._pipeline.confirming = True
        if not method.nowait:
            self.send(commands.Confirm.SelectOk())

    # -- consuming -------------------------------------------------------------------

    def _qos(self, method: commands.Basic.Qos) -> None:
        if method.prefetch_size:
            raise BrokerError(NOT_IMPLEMENTED, f"prefetch_size!=0 ({method.prefetch_size})")
        if method.global_:
            self._global_prefetch = method.prefetch_count
            self.resume()
        else:
            self._prefetch_count = method.prefetch_count
        self.send(commands.Basic.QosOk())

    def _consume(self, method: commands.Basic.Consume) -> None:
        queue = self._definitions.queue_name(method.queue)
        tag = method.consumer_tag
        if tag and (tag in self._consumers or tag == self._reply.consumer_tag):
            raise BrokerError(NOT_ALLOWED, f"attempt to reuse consumer tag '{tag}'")
        if queue == PSEUDO_QUEUE:
            tag = self._reply.consume(method, server_generated_name("amq.ctag-"))
            if not method.nowait:
                self.send(commands.Basic.ConsumeOk(tag))
            return
        self._run_async(self._consume_queue(method, queue), method)

    async def _consume_queue(self, method: commands.Basic.Consume, queue: str) -> None:
        ctx = self._ctx
        tag, endpoint = await ctx.broker.consuming.consume(
            ctx.session, queue, self, consumer_tag=method.consumer_tag,
            no_ack=method.no_ack, exclusive=method.exclusive,
            prefetch_count=self._prefetch_count, arguments=method.arguments,
        )  # fmt: skip
        if self.closed:  # closed while a remote leader registered the consumer
            ctx.broker.consuming.cancel(ctx.session, queue, tag)
            return
        self._consumers[tag] = SinkConsumer(endpoint, ConsumeRequest(
            queue, tag, method.no_ack, method.exclusive, self._prefetch_count,
            dict(method.arguments or {})))
        self._queues_used.add(queue)
        # Sent here, not when the task is done: the queue's pump (scheduled by the
        # registration) must find the consumer known and its consume-ok sent.
        if not method.nowait:
            self.send(commands.Basic.ConsumeOk(tag))
        endpoint.schedule_pump()

    def _cancel(self, method: commands.Basic.Cancel) -> None:
        tag = method.consumer_tag or ""
        consumer = self._consumers.pop(tag, None)
        if consumer is None:
            self._reply.cancel(tag)
        else:
            self._ctx.broker.consuming.cancel(self._ctx.session, consumer.endpoint.name, tag)
        if not method.nowait:
            self.send(commands.Basic.CancelOk(tag))

    def _get(self, method: commands.Basic.Get) -> None:
        self._run_async(self._get_message(method), method)

    async def _get_message(self, method: commands.Basic.Get) -> None:
        ctx = self._ctx
        queue = self._definitions.queue_name(method.queue)
        found = await ctx.broker.consuming.get(ctx.session, queue, self._key, method.no_ack)
        self._queues_used.add(queue)
        if self.closed:
            if found is not None and not method.no_ack:
                found[4].reject([found[0]], requeue=True)
            return
        if found is None:
            self.send(commands.Basic.GetEmpty())
            return
        offset, redelivered, message, left, endpoint = found
        entry = None if method.no_ack else Unacked(endpoint, offset, None)
        tag = self._tags.issue(entry)
        self.counters.get += 1
        self.counters.redeliver += redelivered
        reply = build_method(commands.Basic.GetOk, delivery_tag=tag, redelivered=redelivered,
                             exchange=message.exchange, routing_key=message.routing_key,
                             message_count=left)
        ctx.machine.send_content(self.number, reply, message.encoded_properties(), message.body)
        ctx.notify_output()

    def send(self, method: base.Frame) -> None:
        """Send `method` on this channel."""
        self._ctx.machine.send_method(self.number, method)
        self._ctx.notify_output()

    def _settle(self, settlement: Settlement[QueueType]) -> list[QueueType]:
        """Carry `settlement` out on the queues (the settlement's and the tx's `Settle`)."""
        settled = apply_settlement(self._ctx.broker, self._ctx.session.vhost, settlement)
        if settlement.ack:
            self.counters.ack += len(settlement.deliveries)
        if self._global_prefetch:
            self.resume()  # channel credit grew for every queue we consume from
        return settled
