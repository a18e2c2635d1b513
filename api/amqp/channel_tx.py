"""Settling deliveries on their queues, and what a transactional channel holds back.

Theory of operation
-------------------
After tx.select, RabbitMQ checks each basic.publish and each ack / nack /
reject when it arrives (an unknown exchange or delivery tag fails at once)
but carries none of them out until tx.commit; tx.rollback forgets the
publishes and puts the settled delivery tags back among the unacked, so the
client may ack them again. :class:`Transaction` is that buffer;
:class:`ChannelTransaction` is a channel's tx.select / tx.commit / tx.rollback
over it (the channel session holds one).

:func:`apply_settlement` carries a settlement out: the deliveries are grouped
by queue and acked, or rejected with or without requeue, one call per queue.
A delivery whose queue was deleted meanwhile (even if a new queue of that name
exists) has nothing left to settle.

tx.commit answers once the transaction holds as a whole (:func:`settles_durable`
for its acks): every publish confirmed (on a replicated queue: persisted by
every in-sync replica), and every ack or discard on disk on the queues it
touched and, when replicated, held by every in-sync follower. Otherwise the
channel closes with RabbitMQ's 406 "partial tx completion".
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Generic, Protocol, TypeVar

from pamqp import base, commands

from api.amqp.delivery_tags import DeliveryTags, Unacked
from api.amqp.publish_pipeline import PublishPipeline
from logbroker.broker import Broker
from logbroker.errors import PRECONDITION_FAILED, BrokerError
from logbroker.message import Message
from logbroker.queue.queue_type import QueueType

__all__ = ["ChannelTransaction", "Settle", "Settlement", "Transaction", "TxChannel",
           "apply_settlement", "settles_durable"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Settlement(Generic[T]):
    """One ack (``ack``), or nack / reject with or without ``requeue``, of taken tags."""

    deliveries: list[tuple[int, Unacked[T]]]
    ack: bool
    requeue: bool = False


@dataclass(slots=True)
class Transaction(Generic[T]):
    """Publishes and settlements waiting for tx.commit, in arrival order."""

    publishes: list[tuple[Message, bool]] = field(default_factory=list)  # (message, mandatory)
    settlements: list[Settlement[T]] = field(default_factory=list)

    def take(self) -> tuple[list[tuple[Message, bool]], list[Settlement[T]]]:
        """Everything buffered, leaving the transaction empty (commit or rollback)."""
        publishes, settlements = self.publishes, self.settlements
        self.publishes, self.settlements = [], []
        return publishes, settlements


#: Carries a settlement out on the queues; returns the queues where that settled messages.
Settle = Callable[["Settlement[QueueType]"], list[QueueType]]


class TxChannel(Protocol):
    """What a transaction needs of its channel."""

    @property
    def closed(self) -> bool: ...

    def send(self, method: base.Frame) -> None:
        """Send `method` on the channel."""

    def fail(self, err: BrokerError, method: base.Frame) -> None:
        """Close the channel (or the connection) for `err`, raised by `method`."""

    def hold_requests(self) -> None:
        """Later requests wait (in arrival order) until `release_requests`."""

    def release_requests(self) -> None:
        """Handle the requests that waited."""


class ChannelTransaction:
    """tx.select / tx.commit / tx.rollback of one channel; `open` once selected."""

    def __init__(self, channel: TxChannel, pipeline: PublishPipeline,
                 tags: DeliveryTags[QueueType], settle: Settle) -> None:
        self._channel = channel
        self._pipeline = pipeline
        self._tags = tags
        self._settle = settle
        self._buffer: Transaction[QueueType] | None = None

    @property
    def open(self) -> bool:
        """tx.select was received: publishes and settlements wait for tx.commit."""
        return self._buffer is not None

    def hold_publish(self, message: Message, mandatory: bool) -> None:
        self._selected().publishes.append((message, mandatory))

    def hold_settlement(self, settlement: Settlement[QueueType]) -> None:
        self._selected().settlements.append(settlement)

    def close(self) -> None:
        """The channel is gone: what was held is dropped (its tags are requeued)."""
        self._buffer = None

    def select(self, _method: commands.Tx.Select) -> None:
        if self._pipeline.confirming:
            raise BrokerError(PRECONDITION_FAILED, "cannot switch from confirm to tx mode")
        if self._buffer is None:
            self._buffer = Transaction()
        self._channel.send(commands.Tx.SelectOk())

    def commit(self, method: commands.Tx.Commit) -> None:
        publishes, settlements = self._selected().take()
        touched = [endpoint for settlement in settlements for endpoint in self._settle(settlement)]
        settled = asyncio.ensure_future(settles_durable(touched))
        # Retrieved even if the channel closes first and the barrier never runs.
        settled.add_done_callback(_retrieve_outcome)
        for message, mandatory in publishes:
            self._pipeline.submit(message, mandatory)
        self._channel.hold_requests()  # later requests wait for commit-ok
        self._pipeline.barrier(lambda all_confirmed: settled.add_done_callback(
            partial(self._committed, method, all_confirmed)))

    def _committed(self, method: commands.Tx.Commit, all_confirmed: bool,
                   settled: asyncio.Future[None]) -> None:
        channel = self._channel
        if channel.closed:
            return  # nobody left to tell
        if not all_confirmed or settled.cancelled() or settled.exception() is not None:
            channel.fail(BrokerError(PRECONDITION_FAILED, "partial tx completion"), method)
            return
        channel.send(commands.Tx.CommitOk())
        channel.release_requests()

    def rollback(self, _method: commands.Tx.Rollback) -> None:
        _publishes, settlements = self._selected().take()
        for settlement in settlements:
            self._tags.restore(settlement.deliveries)
        self._channel.send(commands.Tx.RollbackOk())

    def _selected(self) -> Transaction[QueueType]:
        if self._buffer is None:
            raise BrokerError(PRECONDITION_FAILED, "channel is not transactional")
        return self._buffer


def _retrieve_outcome(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


def apply_settlement(broker: Broker, vhost: str, settlement: Settlement[QueueType]
                     ) -> list[QueueType]:
    """Ack, or reject (requeue or not), the settled deliveries on their queues; returns
    the queues where that settled messages (acks, rejects without requeue)."""
    settled: list[QueueType] = []
    by_shell: dict[int, tuple[QueueType, list[int]]] = {}
    for _tag, entry in settlement.deliveries:
        by_shell.setdefault(id(entry.target), (entry.target, []))[1].append(entry.offset)
    for shell, offsets in by_shell.values():
        if shell.closed or _current(broker, vhost, shell.name) is not shell:
            continue  # the queue was deleted (maybe declared anew): nothing to settle
        if settlement.ack:
            shell.ack(offsets)  # ack / reject pump the queue themselves
        else:
            shell.reject(offsets, settlement.requeue)
        if settlement.ack or not settlement.requeue:
            settled.append(shell)
    return settled


async def settles_durable(endpoints: Iterable[QueueType]) -> None:
    """Every settle made so far on `endpoints` is durable (QueueType.settles_durable)."""
    unique = {id(endpoint): endpoint for endpoint in endpoints}
    await asyncio.gather(*(endpoint.settles_durable() for endpoint in unique.values()))


def _current(broker: Broker, vhost: str, name: str) -> QueueType | None:
    try:
        return broker.endpoint(vhost, name)
    except BrokerError:
        return None  # led by a node that is down: the settlement cannot reach it
