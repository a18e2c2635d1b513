"""`LocalSource`: a shovel's source on this broker (`src-uri` `amqp://`, `amqp:///VHOST`).

Theory of operation. RabbitMQ serves a local source over a direct connection, not
a socket to itself; so does this: the source is a consumer of the local queue
registered through the broker's `Consuming` (`consume_as_broker`), with a
channel key of its own, and it is the consumer's `DeliverySink`. Each delivery
starts one forward (the shovel's callback: publish to the destination, then
settle). The source's `credit` is `prefetch` minus the forwards in flight, so
the queue never hands it more than `prefetch` messages at once, whatever the
ack mode (a no-ack consumer has no unacked count to stop it); it is 0 from
`open` (the consumer registered) to `start`, while the shovel counts the queue.

A forward settles its delivery with `ack` (the message is gone from the queue)
or `requeue` (it is offered again). When the consumer is cancelled by the queue
(the queue deleted, or its leader moved) `closed` resolves with the reason and
the shovel reconnects. `close()` cancels the forwards still running, the
consumer, and requeues what the queue still counts as delivered to this
source: a message whose forward was cut short is offered again (flagged
redelivered), never lost.

Invariants: at most `prefetch` forwards run at once; after `close()` no forward
runs and nothing is settled through this source any more.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Protocol

from logbroker.message import Message
from logbroker.queue.delivery_sink import DeliverySink
from logbroker.queue.queue_type import QueueType

__all__ = ["LocalConsuming", "LocalDelivery", "LocalSource"]

_sources = itertools.count(1)


class LocalConsuming(Protocol):
    """What a local source needs of this broker (`LocalBroker`)."""

    def consume_here(self, vhost: str, queue: str, sink: DeliverySink, *, no_ack: bool,
                     prefetch_count: int) -> Awaitable[tuple[str, QueueType]]: ...

    def release_here(self, vhost: str, queue: str, consumer_tag: str,
                     channel_key: str) -> None:
        """Cancel the consumer and requeue what its channel left unacked."""
        ...


class LocalDelivery:
    """One message taken from the local queue, to be settled once."""

    __slots__ = ("_endpoint", "_offset", "message", "redelivered")

    def __init__(self, endpoint: QueueType, offset: int, message: Message,
                 redelivered: bool) -> None:
        self._endpoint = endpoint
        self._offset = offset
        self.message = message
        self.redelivered = redelivered

    def ack(self) -> None:
        self._endpoint.ack([self._offset])

    def requeue(self) -> None:
        self._endpoint.reject([self._offset], requeue=True)


Forward = Callable[[LocalDelivery], Awaitable[None]]


class LocalSource(DeliverySink):
    def __init__(self, local: LocalConsuming, vhost: str, queue: str, prefetch: int,
                 no_ack: bool, forward: Forward) -> None:
        self._local = local
        self._vhost = vhost
        self._queue = queue
        self._prefetch = max(1, prefetch)
        self._no_ack = no_ack
        self._forward = forward
        self._key = f"shovel-source-{next(_sources)}"
        self._tag: str | None = None
        self._endpoint: QueueType | None = None
        self._started = False  # no credit before `start`: the queue delivers nothing
        self._running: set[asyncio.Task[None]] = set()
        self.closed: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    @property
    def channel_key(self) -> str:
        return self._key

    async def open(self) -> QueueType:
        """Register the consumer, which takes nothing before `start` (so the queue can
        be counted first); the queue."""
        self._tag, self._endpoint = await self._local.consume_here(
            self._vhost, self._queue, self, no_ack=self._no_ack,
            prefetch_count=0 if self._no_ack else self._prefetch)
        return self._endpoint

    def start(self) -> None:
        self._started = True
        if self._endpoint is not None:
            self._endpoint.schedule_pump()

    def deliver(self, queue: str, consumer_tag: str | None, offset: int, redelivered: bool,
                message: Message) -> None:
        if self.closed.done() or self._endpoint is None:
            return  # requeued by close(): the queue still counts it as delivered here
        task = asyncio.ensure_future(self._forward(
            LocalDelivery(self._endpoint, offset, message, redelivered)))
        self._running.add(task)
        task.add_done_callback(self._forwarded)

    def _forwarded(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if not task.cancelled() and task.exception() is not None and not self.closed.done():
            self.closed.set_result(f"forwarding failed: {task.exception()}")
        if self._endpoint is not None and not self.closed.done():
            self._endpoint.schedule_pump()  # room again for one more

    def consumer_cancelled(self, queue: str, consumer_tag: str,
                           leader_moved: bool = False) -> None:
        if not self.closed.done():
            self.closed.set_result(f"the consumer on queue '{queue}' was cancelled by the "
                                   + ("queue's leader moving" if leader_moved else "broker"))

    def credit(self) -> int | None:
        if self.closed.done() or not self._started:
            return 0
        return self._prefetch - len(self._running)

    def close(self) -> None:
        """Stop forwarding; what was taken and not settled goes back to the queue."""
        if not self.closed.done():
            self.closed.set_result("closed")
        for task in self._running:
            task.cancel()
        self._running.clear()
        if self._tag is not None:
            self._local.release_here(self._vhost, self._queue, self._tag, self._key)
