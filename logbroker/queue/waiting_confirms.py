"""`WaitingConfirms`: a replicated queue's publishes, durable on the leader, waiting for
the high watermark.

Theory of operation. A replicated queue's leader confirms a publish only once
it is durable here and every in-sync replica holds it: once the high
watermark reaches the end of its write. The shell adds each publish when its
write is durable here, and takes out those a release of the high watermark
passed (`passed`), or all of them when the queue's leadership ends
(`take_all`). What a publish is (a future to resolve, a simulated client's
publish) is the caller's. Writes are durable in offset order, except a
transient message's, which is durable once written, before the fsync that
earlier persistent ones wait for: it then waits behind them here, so
confirms still go out in the order they came.

Invariants: publishes come out in the order they went in; one comes out
only once the high watermark is at or past its end.
"""

from __future__ import annotations

import collections
from typing import Generic, TypeVar

__all__ = ["WaitingConfirms"]

T = TypeVar("T")


class WaitingConfirms(Generic[T]):
    def __init__(self) -> None:
        self._waiting: collections.deque[tuple[int, T]] = collections.deque()

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, next_offset: int, publish: T) -> None:
        """`publish`, whose write ends before `next_offset`, is durable on the leader."""
        self._waiting.append((next_offset, publish))

    def passed(self, high_watermark: int) -> list[T]:
        """The publishes the high watermark has passed, in order; they wait no longer."""
        waiting = self._waiting
        passed: list[T] = []
        while waiting and waiting[0][0] <= high_watermark:
            passed.append(waiting.popleft()[1])
        return passed

    def take_all(self) -> list[T]:
        """Every publish still waiting (the leadership ended: none will be confirmed)."""
        taken = [publish for _, publish in self._waiting]
        self._waiting.clear()
        return taken
