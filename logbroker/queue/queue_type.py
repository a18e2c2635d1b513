"""`QueueType`: the one interface of a queue, whatever runs it (RabbitMQ's `rabbit_queue_type`).

Three kinds implement it, and callers (the AMQP channel, the WebSocket session,
REST, `Consuming`, `Definitions`) never ask which one they hold:

- a local queue: `QueueShell` on a standalone node, or a queue of one replica;
- a replicated queue's leader: `QueueShell` with a `ReplicationGate`, whose
  deliveries wait for the leader lease and confirms for the high watermark;
- a forwarded queue: `RemoteQueue` (`logbroker.cluster.remote_queue`), a
  queue led by another node, reached over the cluster link.

What differs between them that a caller may need to know is `capabilities()`,
not the class. Everything a forwarded queue must ask its leader is awaitable
here (consume, dequeue, purge, stats); settling and cancelling are notices and
stay synchronous, so a channel's order of settles is the order they leave in.

Declaring and deleting are not methods of a queue: they are metadata commands
(`logbroker.definitions`), applied on every node, which then opens or drops
the `QueueShell` where the queue is led. `declared()` is what a declare asks
of the queue once it exists (the idle timer of `x-expires`, the counts).
Recovery is opening: `QueueShell.open` rebuilds a local queue or a leader from
its files; a forwarded queue has nothing here to recover.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from logbroker.message import Message
from logbroker.queue.consumers import Consumer
from logbroker.queue.delivery_sink import DeliverySink

__all__ = ["QUEUE_ARGUMENTS", "Capabilities", "Dequeued", "ForwardedQueue", "QueueKind",
           "QueueStats", "QueueType", "RemoteQueues"]


class QueueKind(Enum):
    LOCAL = "local"
    REPLICATED_LEADER = "replicated leader"
    FORWARDED = "forwarded"


# Every kind takes every argument: a forwarded queue is a `QueueShell` on its leader.
QUEUE_ARGUMENTS = frozenset({
    "x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy",
    "x-delivery-limit", "x-expires", "x-max-age", "x-max-length", "x-max-length-bytes",
    "x-max-priority", "x-message-ttl", "x-overflow", "x-queue-leader-locator",
    "x-queue-master-locator", "x-queue-mode", "x-queue-replicas", "x-queue-type",
    "x-queue-version", "x-retention-bytes", "x-single-active-consumer",
})
CONSUMER_ARGUMENTS = frozenset({"x-priority"})


@dataclass(frozen=True, slots=True)
class Capabilities:
    kind: QueueKind
    # Whether this node serves a replay of the queue's log from this object (a
    # forwarded queue's reader is sent to the leader, or to an in-sync copy here).
    replay: bool
    queue_arguments: frozenset[str] = QUEUE_ARGUMENTS
    consumer_arguments: frozenset[str] = CONSUMER_ARGUMENTS

    @property
    def runs_here(self) -> bool:
        """Whether this node holds the queue's log and decides its deliveries."""
        return self.kind is not QueueKind.FORWARDED

    @property
    def replicated(self) -> bool:
        return self.kind is QueueKind.REPLICATED_LEADER


LOCAL = Capabilities(QueueKind.LOCAL, replay=True)
REPLICATED_LEADER = Capabilities(QueueKind.REPLICATED_LEADER, replay=True)
FORWARDED = Capabilities(QueueKind.FORWARDED, replay=False)


@dataclass(frozen=True, slots=True)
class Dequeued:
    """What basic.get took: the message, and how many stay ready behind it."""

    offset: int
    redelivered: bool
    message: Message
    messages_left: int


@dataclass(frozen=True, slots=True)
class QueueStats:
    messages: int  # ready
    consumers: int
    first_offset: int  # the log's retained range [first_offset, end_offset)
    end_offset: int


class QueueType(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    def capabilities(self) -> Capabilities: ...

    def declared(self) -> Awaitable[QueueStats]:
        """A declare named the queue (x-expires counts from now); its stats."""
        ...

    def consume(self, consumer: Consumer, sink: DeliverySink) -> Awaitable[None]:
        """basic.consume: deliveries go to `sink`; BrokerError if refused (exclusive)."""
        ...

    def cancel(self, consumer_tag: str) -> None:
        """basic.cancel; an auto-delete queue goes with its last consumer."""
        ...

    def channel_closed(self, channel_key: str) -> None:
        """Forget the channel's consumers and requeue what it left unacked."""
        ...

    def dequeue(self, channel_key: str, no_ack: bool) -> Awaitable[Dequeued | None]:
        """basic.get: None when nothing is ready."""
        ...

    def ack(self, offsets: Sequence[int]) -> None: ...

    def reject(self, offsets: Sequence[int], requeue: bool) -> None:
        """basic.reject and basic.nack: requeued, or discarded (dead-lettered)."""
        ...

    def settles_durable(self) -> Awaitable[None]:
        """Resolves once every ack and discard made so far here is on disk (and, on a
        replicated queue, held by every in-sync follower); raises if it cannot be."""
        ...

    def schedule_pump(self) -> None:
        """A sink has room again: deliver what waits for it."""
        ...

    def purge(self) -> Awaitable[int]:
        """queue.purge: removes ready messages (not unacked ones); how many."""
        ...

    def stats(self) -> Awaitable[QueueStats]: ...


class ForwardedQueue(QueueType, Protocol):
    """A queue whose leader runs on another node (`node`)."""

    @property
    def node(self) -> str: ...

    async def holds_batch(self, producer: str, seq: int, since_ms: int) -> bool:
        """Whether the queue's log has a message of transactional batch (producer, seq)
        since `since_ms` (`logbroker.producer_batches`)."""
        ...


class RemoteQueues(Protocol):
    """The cluster's side of the broker: queues led elsewhere, and forwarded publishes."""

    def endpoint(self, vhost: str, name: str) -> ForwardedQueue | None:
        """The queue led by another node (raises BrokerError 404 naming the node when
        that node is down), or None for a queue this node leads / unknown."""
        ...

    def publish(self, vhost: str, batch: Sequence[tuple[Message, Sequence[str]]]
                ) -> Awaitable[list[bool]]:
        """Append each message to its named remote queues: sent at once (so call order
        is the order on every node); resolves with, per message, whether confirmed."""
        ...

    def holds(self, vhost: str, names: Iterable[str], publisher_id: str
              ) -> list[asyncio.Future[None]]:
        """What a publisher (connection `publisher_id`) that just published to the remote
        queues `names` must wait for: the holds their leaders announced."""
        ...

    def figures(self, node: str, request: dict[str, Any], timeout_s: float
                ) -> Awaitable[dict[str, Any]]:
        """Node `node`'s answer to `q.figures` (queue_figures.py) within `timeout_s`
        (raises BrokerError when it is down, unreachable or slower)."""
        ...
