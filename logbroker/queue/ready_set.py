"""The ready messages of a queue, in delivery order.

A FIFO queue delivers the lowest ready offset first. Offsets at or past
`scan_offset` have never been delivered, so they are all ready and need no
memory; offsets that were delivered and came back (requeue, a consumer gone)
sit in a min-heap and, being lower, go first: a requeued message keeps its
original place in the queue.

A priority queue delivers the highest priority first and, within a priority,
the lowest offset; it keeps one min-heap of offsets per priority.

Invariant for both: every offset is in the set at most once.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence


class FifoReadySet:
    def __init__(self, scan_offset: int) -> None:
        self.scan_offset = scan_offset
        self.next_offset = scan_offset
        self._returned: list[int] = []

    def __len__(self) -> int:
        return len(self._returned) + self.next_offset - self.scan_offset

    def add_new(self, offset: int, priority: int) -> None:
        if offset != self.next_offset:
            raise ValueError(f"new offset {offset} is not the queue's next {self.next_offset}")
        self.next_offset += 1

    def add_new_run(self, first_offset: int, priorities: Sequence[int]) -> None:
        """`add_new` for the consecutive offsets from `first_offset`."""
        if first_offset != self.next_offset:
            raise ValueError(
                f"new offset {first_offset} is not the queue's next {self.next_offset}")
        self.next_offset += len(priorities)

    def add_returned(self, offset: int, priority: int) -> None:
        heapq.heappush(self._returned, offset)

    def returned_sorted(self, offsets: list[int]) -> None:
        """`add_returned` for every one of `offsets`, ascending and none in the set yet
        (a restart's unacked gaps): an ascending list already is a heap."""
        if self._returned:
            raise ValueError("returned_sorted only fills an empty heap")
        self._returned = offsets

    def peek(self) -> int | None:
        if self._returned:
            return self._returned[0]
        return self.scan_offset if self.scan_offset < self.next_offset else None

    def pop(self) -> int:
        if self._returned:
            return heapq.heappop(self._returned)
        if self.scan_offset >= self.next_offset:
            raise IndexError("no ready message")
        self.scan_offset += 1
        return self.scan_offset - 1

    def take_all(self) -> list[int]:
        """Remove and return every ready offset (purge)."""
        taken = sorted(self._returned) + list(range(self.scan_offset, self.next_offset))
        self._returned.clear()
        self.scan_offset = self.next_offset
        return taken


class PriorityReadySet:
    def __init__(self, max_priority: int) -> None:
        self._heaps: list[list[int]] = [[] for _ in range(max_priority + 1)]
        self._count = 0
        self.next_offset = 0

    def __len__(self) -> int:
        return self._count

    def _clamp(self, priority: int) -> int:
        # RabbitMQ delivers messages above x-max-priority as if at the maximum.
        return min(priority, len(self._heaps) - 1)

    def add_new(self, offset: int, priority: int) -> None:
        heapq.heappush(self._heaps[self._clamp(priority)], offset)
        self.next_offset = max(self.next_offset, offset + 1)
        self._count += 1

    def add_new_run(self, first_offset: int, priorities: Sequence[int]) -> None:
        for index, priority in enumerate(priorities):
            self.add_new(first_offset + index, priority)

    def add_returned(self, offset: int, priority: int) -> None:
        heapq.heappush(self._heaps[self._clamp(priority)], offset)
        self._count += 1

    def add_ascending(self, first_offset: int, priorities: Sequence[int]) -> None:
        """`add_new` for consecutive offsets above every offset in the set (a restart's
        unacked gaps, lowest first): appended in order, each heap stays sorted, so a
        heap. A run of one priority (the usual backlog) is one list extension."""
        if not priorities:
            return
        top = self.next_offset
        if first_offset < top and self._count:
            raise ValueError(f"offset {first_offset} is below the set's {top}")
        end = first_offset + len(priorities)
        if priorities.count(priorities[0]) == len(priorities):
            self._heaps[self._clamp(priorities[0])].extend(range(first_offset, end))
        else:
            for offset, priority in zip(range(first_offset, end), priorities, strict=True):
                self._heaps[self._clamp(priority)].append(offset)
        self._count += len(priorities)
        self.next_offset = max(self.next_offset, end)

    def _top(self) -> list[int] | None:
        for heap in reversed(self._heaps):
            if heap:
                return heap
        return None

    def peek(self) -> int | None:
        heap = self._top()
        return heap[0] if heap else None

    def pop(self) -> int:
        heap = self._top()
        if heap is None:
            raise IndexError("no ready message")
        self._count -= 1
        return heapq.heappop(heap)

    def take_all(self) -> list[int]:
        taken = sorted(offset for heap in self._heaps for offset in heap)
        for heap in self._heaps:
            heap.clear()
        self._count = 0
        return taken


ReadySet = FifoReadySet | PriorityReadySet
PriorityOf = Callable[[int], int]
