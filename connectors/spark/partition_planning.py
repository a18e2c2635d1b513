"""How a micro-batch's offset range becomes Spark input partitions, pure.

Each queue's range [start, end) is cut into slices of about `rows_per_partition`
offsets, and further so that there are at least `min_partitions` slices in all
(every executor core gets work), never a slice of nothing. Slices of one queue
are consecutive, so reading them in order reads the queue in offset order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class QueueSlice:
    queue: str
    start: int
    end: int  # exclusive

    @property
    def rows(self) -> int:
        return self.end - self.start


def plan_slices(start: Mapping[str, int], end: Mapping[str, int], rows_per_partition: int,
                min_partitions: int = 1) -> list[QueueSlice]:
    ranges = [(queue, offset, end.get(queue, offset)) for queue, offset in start.items()
              if end.get(queue, offset) > offset]
    total = sum(stop - begin for _, begin, stop in ranges)
    if total == 0:
        return []
    # The slice size that gives at least min_partitions slices overall.
    size = max(1, min(rows_per_partition, -(-total // max(1, min_partitions))))
    out: list[QueueSlice] = []
    for queue, begin, stop in ranges:
        count = -(-(stop - begin) // size)
        step = -(-(stop - begin) // count)  # even slices rather than one short tail
        for first in range(begin, stop, step):
            out.append(QueueSlice(queue, first, min(first + step, stop)))
    return out
