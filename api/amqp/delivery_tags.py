"""Delivery tags of one channel: which tag names which unacked message.

Theory of operation
-------------------
Every basic.deliver and basic.get-ok on a channel carries the next delivery
tag (1, 2, 3, ...; one counter per channel, as RabbitMQ). A delivery that
needs an ack is remembered as ``tag -> Unacked(target, offset, consumer_tag)``;
``target`` is whatever the caller settles against (the queue's shell object,
not its name, so a queue deleted and declared again under the same name never
receives an ack meant for its predecessor). no-ack deliveries consume a tag but
are not remembered, so acking them is an "unknown delivery tag", as in RabbitMQ.

``take(tag, multiple)`` follows RabbitMQ's ``collect_acks``:

* ``multiple`` with tag 0: every unacked delivery;
* ``multiple``: every unacked delivery up to and including ``tag``;
* otherwise just ``tag``;

and in the last two cases ``tag`` itself must be unacked, or the whole call
fails with :class:`UnknownDeliveryTag` (406 "unknown delivery tag N").

The map is a dict in insertion order, which is tag order, so a multiple ack
walks only the entries it removes. ``consumer_unacked`` counts the unacked
deliveries made to consumers (not basic.get), which is what the channel-wide
(``global``) prefetch limits. Pure: no I/O, no asyncio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["DeliveryTags", "Unacked", "UnknownDeliveryTag"]

T = TypeVar("T")


class UnknownDeliveryTag(Exception):
    """An ack / nack / reject named a tag that is not an unacked delivery."""

    def __init__(self, tag: int) -> None:
        super().__init__(f"unknown delivery tag {tag}")
        self.tag = tag


@dataclass(slots=True)  # one per delivery: not frozen, which would cost 3x to build
class Unacked(Generic[T]):
    """One delivery waiting for its ack: where it came from."""

    target: T
    offset: int
    consumer_tag: str | None  # None: a basic.get


class DeliveryTags(Generic[T]):
    """The tag counter and the unacked deliveries of one channel."""

    def __init__(self) -> None:
        self._next = 1
        self._unacked: dict[int, Unacked[T]] = {}
        self.consumer_unacked = 0

    def __len__(self) -> int:
        return len(self._unacked)

    def issue(self, entry: Unacked[T] | None) -> int:
        """The next tag; ``entry`` is remembered unless None (a no-ack delivery)."""
        tag = self._next
        self._next += 1
        if entry is not None:
            self._unacked[tag] = entry
            if entry.consumer_tag is not None:
                self.consumer_unacked += 1
        return tag

    def take(self, tag: int, multiple: bool) -> list[tuple[int, Unacked[T]]]:
        """Remove and return the deliveries an ack / nack / reject settles, in tag order."""
        if multiple and tag == 0:
            return self.take_all()
        if tag not in self._unacked:
            raise UnknownDeliveryTag(tag)
        if not multiple:
            return [(tag, self._pop(tag))]
        taken: list[int] = []
        for current in self._unacked:  # tag order: stop at the named tag
            if current > tag:
                break
            taken.append(current)
        return [(current, self._pop(current)) for current in taken]

    def take_all(self) -> list[tuple[int, Unacked[T]]]:
        """Remove every unacked delivery (basic.recover, the channel closing)."""
        taken = list(self._unacked.items())
        self._unacked.clear()
        self.consumer_unacked = 0
        return taken

    def restore(self, entries: list[tuple[int, Unacked[T]]]) -> None:
        """Put taken deliveries back (tx.rollback), keeping tag order."""
        if not entries:
            return
        merged = dict(self._unacked)
        for tag, entry in entries:
            merged[tag] = entry
            if entry.consumer_tag is not None:
                self.consumer_unacked += 1
        self._unacked = dict(sorted(merged.items()))

    def _pop(self, tag: int) -> Unacked[T]:
        entry = self._unacked.pop(tag)
        if entry.consumer_tag is not None:
            self.consumer_unacked -= 1
        return entry
