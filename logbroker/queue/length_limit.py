"""`LengthLimit`: a queue's `x-max-length` / `x-max-length-bytes` under its `x-overflow`.

Theory of operation. The limits count ready messages. Under `reject-publish`
(and `reject-publish-dlx`) a publish is refused before it is written (`admit`);
under `drop-head` every publish is admitted and the queue core drops (or
dead-letters, `maxlen`) from the head while the ready messages are `over` the
limits, after each message made ready, after a requeue and when a policy
lowers a limit.

A publish is admitted some time before it is ready (it is written first):
admitted messages count against the limits until the shell says they are
written (`written`), or publishes admitted back to back would all see the
same ready count and overshoot `x-max-length`.

Invariants: `pending_count` and `pending_bytes` never go below zero; under
`drop-head`, nothing is ever refused.
"""

from __future__ import annotations

from collections.abc import Sequence

from logbroker.queue.queue_limits import Admission, Overflow, QueueLimits

__all__ = ["LengthLimit"]


class LengthLimit:
    def __init__(self, limits: QueueLimits) -> None:
        self.pending_count = 0  # admitted, not written yet
        self.pending_bytes = 0
        self.set_limits(limits)

    def set_limits(self, limits: QueueLimits) -> None:
        """A policy changed the limits. What follows from them is worked out here, once,
        not at each of the many publishes in between."""
        self.limits = limits
        drop_head = limits.overflow is Overflow.DROP_HEAD
        # `admit` says ACCEPT whatever the sizes (no reject-publish limit).
        self.accepts_all = drop_head or not limits.bounds_length
        # Drops act after each message made ready, so a batch is made ready one by one.
        self.drops_per_message = drop_head and limits.bounds_length

    def admit(self, size_bytes: int, ready_count: int, ready_bytes: int) -> Admission:
        """Whether a message of `size_bytes` may enter a queue holding `ready_count`
        messages of `ready_bytes`; an accepted one counts as pending."""
        limits = self.limits
        # Inline, not split into helpers: this runs once per message published.
        full = limits.overflow is not Overflow.DROP_HEAD and (
            (limits.max_length is not None
             and ready_count + self.pending_count >= limits.max_length)
            or (limits.max_length_bytes is not None
                and ready_bytes + self.pending_bytes + size_bytes > limits.max_length_bytes))
        if not full:
            self.pending_count += 1
            self.pending_bytes += size_bytes
            return Admission.ACCEPT
        if limits.overflow is Overflow.REJECT_PUBLISH_DLX and limits.dead_letter:
            return Admission.REJECT_DEAD_LETTER
        return Admission.REJECT

    def admit_all(self, sizes: Sequence[int]) -> bool:
        """Admit every message of a batch at once when no size can be refused (the
        usual case); False, admitting none, when each must be admitted in turn."""
        if not self.accepts_all:
            return False
        self.pending_count += len(sizes)
        self.pending_bytes += sum(sizes)
        return True

    def written(self, count: int, total_bytes: int) -> None:
        """`count` admitted messages of `total_bytes` are written (or their write failed):
        they count no longer."""
        self.pending_count = max(0, self.pending_count - count)
        self.pending_bytes = max(0, self.pending_bytes - total_bytes)

    def over(self, ready_count: int, ready_bytes: int) -> bool:
        """Whether drop-head must drop the head of a queue holding that much."""
        limits = self.limits
        if limits.overflow is not Overflow.DROP_HEAD:
            return False
        return (limits.max_length is not None and ready_count > limits.max_length) or (
            limits.max_length_bytes is not None and ready_bytes > limits.max_length_bytes)
