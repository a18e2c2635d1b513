"""`Consuming`: basic.consume / cancel / get, and a channel closing, for any queue.

Deliveries go to a `DeliverySink` (an AMQP channel, a WebSocket...), which
owns delivery tags; the broker side speaks in (queue, offset). This object
checks what RabbitMQ checks before a consumer or a get reaches a queue
(exclusive ownership, read permission, the queue existing), then speaks only
the queue interface (`QueueType`): a queue here and one led by another node
answer the same calls. What follows from them on the queue's own node (an
auto-delete queue deleted with its last consumer, an exclusive consumer
refused) is the queue's and its broker's business, not this object's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from logbroker.access_control import AccessControl
from logbroker.broker_config import Session
from logbroker.definitions import server_generated_name
from logbroker.errors import NOT_FOUND, BrokerError
from logbroker.message import Message
from logbroker.metadata import MetadataState
from logbroker.queue.consumers import Consumer
from logbroker.queue.delivery_sink import DeliverySink
from logbroker.queue.queue_type import QueueType

__all__ = ["Consuming", "QueueLookup"]


class QueueLookup(Protocol):
    """Where a queue is reached from this node (`Broker`)."""

    def endpoint(self, vhost: str, name: str) -> QueueType | None:
        """The queue, here or forwarded; BrokerError 404 if its leader node is down."""
        ...

    async def endpoint_when_open(self, vhost: str, name: str) -> QueueType | None:
        """`endpoint`, waiting briefly for a queue whose leadership is moving here."""
        ...


class Consuming:
    def __init__(self, state: Callable[[], MetadataState], access: AccessControl,
                 queues: QueueLookup) -> None:
        self._state = state
        self._access = access
        self._queues = queues

    async def consume(
        self, session: Session, queue: str, sink: DeliverySink, *,
        consumer_tag: str = "", no_ack: bool = False, exclusive: bool = False,
        prefetch_count: int = 0, arguments: Mapping[str, Any] | None = None,
    ) -> tuple[str, QueueType]:
        """basic.consume: the consumer tag (generated when empty) and the queue."""
        endpoint = await self._readable(session, queue)
        return await self._consume(endpoint, sink, consumer_tag, no_ack, exclusive,
                                   prefetch_count, arguments)

    async def consume_as_broker(self, vhost: str, queue: str, sink: DeliverySink, *,
                                connection_id: str, no_ack: bool, prefetch_count: int
                                ) -> tuple[str, QueueType]:
        """A consumer of the broker's own (a shovel whose source is this broker:
        RabbitMQ's direct connection). It has no user, so no permission is checked;
        an exclusive queue of another connection is still refused."""
        self._state().check_queue_access(vhost, queue, connection_id)
        endpoint = await self._queues.endpoint_when_open(vhost, queue)
        if endpoint is None:
            raise BrokerError(NOT_FOUND, f"no queue '{queue}' in vhost '{vhost}'")
        return await self._consume(endpoint, sink, "", no_ack, False, prefetch_count, None)

    async def _consume(self, endpoint: QueueType, sink: DeliverySink, consumer_tag: str,
                       no_ack: bool, exclusive: bool, prefetch_count: int,
                       arguments: Mapping[str, Any] | None) -> tuple[str, QueueType]:
        tag = consumer_tag or server_generated_name("amq.ctag-")
        priority = (arguments or {}).get("x-priority", 0)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise BrokerError(406, f"invalid arg 'x-priority' for consumer '{tag}': {priority!r}")
        consumer = Consumer(tag, sink.channel_key, prefetch_count=prefetch_count,
                            priority=priority, no_ack=no_ack, exclusive=exclusive)
        await endpoint.consume(consumer, sink)
        return tag, endpoint

    def cancel(self, session: Session, queue: str, consumer_tag: str) -> None:
        """basic.cancel (or the channel closing)."""
        endpoint = self._endpoint_quietly(session.vhost, queue)
        if endpoint is not None:
            endpoint.cancel(consumer_tag)

    async def get(self, session: Session, queue: str, channel_key: str, no_ack: bool
                  ) -> tuple[int, bool, Message, int, QueueType] | None:
        """basic.get: (offset, redelivered, message, messages left, queue) or None if empty."""
        endpoint = await self._readable(session, queue)
        got = await endpoint.dequeue(channel_key, no_ack)
        if got is None:
            return None
        return got.offset, got.redelivered, got.message, got.messages_left, endpoint

    def channel_closed(self, vhost: str, channel_key: str, queues: set[str]) -> None:
        """Requeue what the channel left unacked on each queue it used."""
        for name in queues:
            endpoint = self._endpoint_quietly(vhost, name)
            if endpoint is not None:
                endpoint.channel_closed(channel_key)

    def _endpoint_quietly(self, vhost: str, name: str) -> QueueType | None:
        try:
            return self._queues.endpoint(vhost, name)
        except BrokerError:
            return None  # its node is down: nothing there to cancel or requeue from here

    async def _readable(self, session: Session, queue: str) -> QueueType:
        self._state().check_queue_access(session.vhost, queue, session.connection_id)
        self._access.check(session, "queue", queue, "read")
        endpoint = await self._queues.endpoint_when_open(session.vhost, queue)
        if endpoint is None:
            raise BrokerError(NOT_FOUND, f"no queue '{queue}' in vhost '{session.vhost}'")
        return endpoint
