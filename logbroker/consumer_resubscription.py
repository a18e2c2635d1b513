"""Consumers that follow their queue's leader when it moves (failover or handover).

When a replicated queue's leader changes, the consumers registered with the old
leader are gone with it. RabbitMQ's mirrored queues resubscribe them to the new
leader without the client noticing, except those that asked to be told with the
consumer argument `x-cancel-on-ha-failover: true`, which get `basic.cancel`.
We do the same: the sink (an AMQP channel, a WebSocket) keeps the consumer and
its delivery tags, and `resubscribe` registers the same consumer tag with the
new leader once the queue is open there. What the old leader had delivered and
not seen acked is ready again on the new one and comes back flagged
redelivered; acks the client still sends for those old deliveries are dropped
(they name the old leader).

The wait is bounded (`RESUBSCRIBE_WAIT_S`): a queue with no live in-sync replica
stays unavailable until one returns, and a consumer is then cancelled rather
than kept waiting forever. A consumer the client cancels, or whose channel
closes, while it waits is not registered (or is cancelled again at once).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from logbroker.broker import Broker
from logbroker.broker_config import Session
from logbroker.errors import NOT_FOUND, BrokerError
from logbroker.queue.delivery_sink import DeliverySink
from logbroker.queue.queue_type import QueueType

logger = logging.getLogger(__name__)

RESUBSCRIBE_WAIT_S = 30.0  # how long a consumer waits for its queue's new leader
RETRY_S = 0.1  # between two attempts while the queue has no reachable leader
CANCEL_ON_FAILOVER = "x-cancel-on-ha-failover"


@dataclass(frozen=True)
class ConsumeRequest:
    """What basic.consume asked for, kept to register the consumer again."""

    queue: str
    consumer_tag: str
    no_ack: bool = False
    exclusive: bool = False
    prefetch_count: int = 0
    arguments: Mapping[str, Any] = field(default_factory=dict)

    @property
    def cancel_on_failover(self) -> bool:
        """The client wants basic.cancel, not a silent resubscription, when the leader moves."""
        return self.arguments.get(CANCEL_ON_FAILOVER) is True


async def resubscribe(broker: Broker, session: Session, sink: DeliverySink,
                      request: ConsumeRequest, wanted: Callable[[], bool],
                      wait_s: float = RESUBSCRIBE_WAIT_S) -> QueueType | None:
    """Register `request`'s consumer with the queue's current leader.

    Retries while the queue exists but has no reachable open leader (404), for at
    most `wait_s`. Returns the new endpoint, or None when the consumer cannot
    follow (the queue was deleted, the wait ran out, the leader refused it) or is
    no longer `wanted` (then nothing stays registered). The caller records the
    endpoint before it next awaits: deliveries may start in the next loop turn.
    """
    clock = broker.clock
    deadline_ms = clock.monotonic_ms() + int(wait_s * 1000)
    while wanted() and broker.state.queue(session.vhost, request.queue) is not None:
        try:
            _, endpoint = await broker.consuming.consume(
                session, request.queue, sink, consumer_tag=request.consumer_tag,
                no_ack=request.no_ack, exclusive=request.exclusive,
                prefetch_count=request.prefetch_count, arguments=request.arguments)
        except BrokerError as error:
            if error.reply_code != NOT_FOUND or clock.monotonic_ms() >= deadline_ms:
                logger.info("consumer %r on queue %r not resubscribed: %s",
                            request.consumer_tag, request.queue, error.text)
                return None
            await asyncio.sleep(RETRY_S)
            continue
        if wanted():
            return endpoint
        broker.consuming.cancel(session, request.queue, request.consumer_tag)
        return None
    return None


@dataclass(frozen=True, slots=True)
class SinkConsumer:
    """A consumer as its sink (AMQP channel, WebSocket) holds it."""

    endpoint: QueueType  # its queue's leader, where its deliveries are settled
    request: ConsumeRequest

    @property
    def no_ack(self) -> bool:
        return self.request.no_ack


class ConsumerMoves:
    """A sink's consumers leaving their queue: told to the client, or following the
    queue's leader (one task per consumer that follows)."""

    def __init__(self, broker: Broker, session: Session, sink: DeliverySink,
                 consumers: dict[str, SinkConsumer], closed: Callable[[], bool],
                 tell_client: Callable[[str], None]) -> None:
        self._broker = broker
        self._session = session
        self._sink = sink
        self._consumers = consumers  # the sink's own table, by consumer tag
        self._closed = closed
        self._tell_client = tell_client  # the consumer is cancelled: basic.cancel or alike
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def consumer_gone(self, tag: str, leader_moved: bool) -> None:
        """`DeliverySink.consumer_cancelled`: follow the new leader, or forget the consumer
        and tell the client."""
        consumer = self._consumers.get(tag)
        if consumer is None or self._closed():
            return
        if leader_moved and not consumer.request.cancel_on_failover:
            if tag not in self._tasks:  # else the link broke and the old leader said so too
                task = asyncio.ensure_future(self._follow(consumer))
                self._tasks[tag] = task
                task.add_done_callback(
                    lambda done: self._tasks.pop(tag) if self._tasks.get(tag) is done else None)
            return
        del self._consumers[tag]
        self._tell_client(tag)

    def _wanted(self, consumer: SinkConsumer) -> bool:
        return not self._closed() and \
            self._consumers.get(consumer.request.consumer_tag) is consumer

    async def _follow(self, consumer: SinkConsumer) -> None:
        tag = consumer.request.consumer_tag
        try:
            endpoint = await resubscribe(self._broker, self._session, self._sink,
                                         consumer.request, lambda: self._wanted(consumer))
        except Exception:  # e.g. the cluster link failed mid-call: the client must know
            logger.exception("resubscribing consumer %r failed", tag)
            endpoint = None
        if endpoint is not None:
            # Before the new leader's first delivery, which comes a loop turn later.
            self._consumers[tag] = replace(consumer, endpoint=endpoint)
            endpoint.schedule_pump()
        elif self._wanted(consumer):
            del self._consumers[tag]
            self._tell_client(tag)
