"""`QueueIntake`: how messages enter a queue core (part of `QueueCore`, as a mixin).

A publish is first admitted (`admit`: reject-publish limits, counting what is
admitted and still being written), then, once written, enqueued in offset order
(`enqueue`, or `enqueue_many` for a written batch). `x-max-length` and
`x-max-length-bytes` count ready messages; under `drop-head` the oldest ready
ones are dropped (or dead-lettered, `maxlen`) after each message enqueued, and
when a policy lowers a limit (`set_limits`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from logbroker.queue.effects import DeadLetterReason, Effect, with_settles
from logbroker.queue.message_meta import MessageMeta, MessageMetaTable, MetaRun
from logbroker.queue.queue_limits import Admission, Overflow, QueueLimits
from logbroker.queue.ready_set import FifoReadySet, PriorityReadySet

__all__ = ["QueueIntake"]


class QueueIntake(ABC):
    """The publish side of the queue core; the core provides the state below and the
    abstract methods."""

    limits: QueueLimits
    next_offset: int
    ready_bytes: int
    _ready: FifoReadySet | PriorityReadySet
    _meta: MessageMetaTable
    _delivered_before: set[int]

    @abstractmethod
    def _take_ready(self) -> int:
        """Take the next ready message out of the ready set; return its offset."""

    @abstractmethod
    def _discard(self, offset: int, reason: DeadLetterReason, effects: list[Effect],
                 settled: list[int]) -> None:
        """Settle a message without delivering it (dead-lettered if the queue has a DLX)."""

    def admit(self, size_bytes: int, pending_count: int = 0, pending_bytes: int = 0) -> Admission:
        """Whether a message of `size_bytes` may be enqueued under reject-publish rules.

        `pending_count` / `pending_bytes`: messages admitted earlier and still being
        written; they will be ready before this one, so they count against the limits.
        """
        limits = self.limits
        if limits.overflow is Overflow.DROP_HEAD:
            return Admission.ACCEPT
        count = len(self._ready) + pending_count
        full = (limits.max_length is not None and count >= limits.max_length) or (
            limits.max_length_bytes is not None
            and self.ready_bytes + pending_bytes + size_bytes > limits.max_length_bytes
        )
        if not full:
            return Admission.ACCEPT
        if limits.overflow is Overflow.REJECT_PUBLISH_DLX and limits.dead_letter:
            return Admission.REJECT_DEAD_LETTER
        return Admission.REJECT

    def enqueue(self, offset: int, meta: MessageMeta, delivered_before: bool = False
                ) -> list[Effect]:
        """The message at `offset` is in the log: make it ready (and enforce drop-head).

        `delivered_before`: it may have been delivered already (by a replicated queue's
        previous leader), so it goes out flagged redelivered."""
        self._meta.append(offset, meta)
        if delivered_before:
            self._delivered_before.add(offset)
        self._ready.add_new(offset, meta.priority)
        self.next_offset = offset + 1
        self.ready_bytes += meta.size_bytes
        return self._enforce_length()

    def enqueue_many(self, first_offset: int, run: MetaRun, delivered_below: int = 0
                     ) -> list[Effect]:
        """`enqueue` for the consecutive offsets from `first_offset` (one written batch);
        those below `delivered_below` may have been delivered before."""
        if self.limits.overflow is Overflow.DROP_HEAD and self.limits.bounds_length:
            # Drops act after each message.
            return [effect for index, meta in enumerate(run) for effect in self.enqueue(
                first_offset + index, meta, first_offset + index < delivered_below)]
        self._meta.extend(first_offset, run)
        self._ready.add_new_run(first_offset, run.priorities)
        end = first_offset + len(run)
        self._delivered_before.update(range(first_offset, min(end, delivered_below)))
        self.next_offset = end
        self.ready_bytes += sum(run.sizes)
        return []

    def accepts_all(self) -> bool:
        """True when `admit` says ACCEPT whatever the sizes (no reject-publish limit)."""
        return self.limits.overflow is Overflow.DROP_HEAD or not self.limits.bounds_length

    def _enforce_length(self) -> list[Effect]:
        limits = self.limits
        if limits.overflow is not Overflow.DROP_HEAD:
            return []
        effects: list[Effect] = []
        settled: list[int] = []
        while self._over_limit():
            offset = self._take_ready()
            self._discard(offset, DeadLetterReason.MAXLEN, effects, settled)
        return with_settles(effects, settled)

    def _over_limit(self) -> bool:
        limits = self.limits
        return (limits.max_length is not None and len(self._ready) > limits.max_length) or (
            limits.max_length_bytes is not None and self.ready_bytes > limits.max_length_bytes
        )

    def set_limits(self, limits: QueueLimits) -> list[Effect]:
        """A policy changed: apply the new limits to the messages already queued."""
        self.limits = limits
        return self._enforce_length()
