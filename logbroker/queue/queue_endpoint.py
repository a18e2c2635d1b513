"""What the protocol layers hold on to for a queue they consume from or settle on.

On a standalone node that is always the queue's `QueueShell`. In a cluster, a
queue led by another node is reached through a `RemoteQueueEndpoint`
(`logbroker.cluster.remote_queue`), which forwards over the cluster link. The
channel code settles and pumps through `QueueEndpoint` and never needs to
know which of the two it has; consuming, getting, purging and counting are
awaited on a remote queue (`logbroker.consuming`, `logbroker.definitions`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Sequence
from typing import Protocol

from logbroker.message import Message
from logbroker.queue.consumers import Consumer
from logbroker.queue.delivery_sink import DeliverySink


class QueueEndpoint(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    def ack(self, offsets: Sequence[int]) -> None: ...

    def reject(self, offsets: Sequence[int], requeue: bool) -> None: ...

    def schedule_pump(self) -> None: ...

    def settles_durable(self) -> Awaitable[None]:
        """Resolves once every ack and discard made so far here is on disk (and, on a
        replicated queue, held by every in-sync follower); raises if it cannot be."""
        ...


class RemoteQueueEndpoint(QueueEndpoint, Protocol):
    """A queue whose leader runs on another node (`node`)."""

    @property
    def node(self) -> str: ...

    async def consume(self, consumer: Consumer, sink: DeliverySink) -> None: ...

    def cancel(self, consumer_tag: str) -> None: ...

    def channel_closed(self, channel_key: str) -> None: ...

    async def get(self, channel_key: str, no_ack: bool
                  ) -> tuple[int, bool, Message, int] | None: ...

    async def counts(self) -> tuple[int, int]:
        """(ready messages, consumers)."""
        ...

    async def figures(self) -> tuple[int, int, int, int]:
        """(ready messages, consumers, log start, readable end), asked once."""
        ...

    async def purge(self) -> int: ...

    async def holds_batch(self, producer: str, seq: int, since_ms: int) -> bool:
        """Whether the queue's log has a message of transactional batch (producer, seq)
        since `since_ms` (`logbroker.producer_batches`)."""
        ...


class RemoteQueues(Protocol):
    """The cluster's side of the broker: queues led elsewhere, and forwarded publishes."""

    def endpoint(self, vhost: str, name: str) -> RemoteQueueEndpoint | None:
        """The endpoint of a queue led by another node (raises BrokerError 404 naming the
        node when that node is down), or None for a queue this node leads / unknown."""
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
