"""Settling deliveries on their queues, and what a transactional channel holds back.

Theory of operation
-------------------
After tx.select, RabbitMQ checks each basic.publish and each ack / nack /
reject when it arrives (an unknown exchange or delivery tag fails at once)
but carries none of them out until tx.commit; tx.rollback forgets the
publishes and puts the settled delivery tags back among the unacked, so the
client may ack them again. :class:`Transaction` is that buffer; the channel
session decides what to do with it.

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
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from api.amqp.delivery_tags import Unacked
from logbroker.broker import Broker
from logbroker.errors import BrokerError
from logbroker.message import Message
from logbroker.queue.queue_type import QueueType

__all__ = ["Settlement", "Transaction", "apply_settlement", "settles_durable"]

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
