"""How long fsyncs take: a fixed-bucket histogram, process-wide, read at scrape time.

Every `GroupCommitter` records each fsync's duration here from its own fsync
thread (one thread per committer, so several writers may record at once);
the metrics endpoint reads a `snapshot` from the event loop. A lock keeps a
snapshot consistent (its count is the sum of its buckets): an uncontended
lock costs well under a microsecond, nothing next to an fsync.

The buckets are fixed, as a Prometheus histogram's are: from 50 us (a
battery-backed cache) to 10 s (a disk in trouble). Pure apart from the lock.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

FSYNC_BUCKETS_S: tuple[float, ...] = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)


@dataclass(frozen=True)
class HistogramSnapshot:
    """Cumulative counts per upper bound (the last bound is +Inf), the sum and the count."""

    buckets: tuple[tuple[float, int], ...]
    sum_s: float
    count: int


class FsyncStats:
    def __init__(self, bounds_s: Sequence[float] = FSYNC_BUCKETS_S) -> None:
        bounds = tuple(float(b) for b in bounds_s)
        if not bounds or any(b <= 0 or not math.isfinite(b) for b in bounds) \
                or list(bounds) != sorted(set(bounds)):
            raise ValueError("bucket bounds must be finite, positive and strictly increasing")
        self._bounds = bounds
        self._lock = threading.Lock()
        self._counts = [0] * (len(bounds) + 1)  # the last one is the +Inf bucket
        self._sum_s = 0.0

    @property
    def bounds_s(self) -> tuple[float, ...]:
        return self._bounds

    def record(self, seconds: float) -> None:
        """Count one fsync that took `seconds` (a negative clock step counts as 0)."""
        seconds = max(seconds, 0.0)
        index = bisect.bisect_left(self._bounds, seconds)  # `le`: a bound includes itself
        with self._lock:
            self._counts[index] += 1
            self._sum_s += seconds

    def snapshot(self) -> HistogramSnapshot:
        with self._lock:
            counts = list(self._counts)
            sum_s = self._sum_s
        cumulative: list[tuple[float, int]] = []
        running = 0
        for bound, count in zip((*self._bounds, math.inf), counts, strict=True):
            running += count
            cumulative.append((bound, running))
        return HistogramSnapshot(tuple(cumulative), sum_s, running)

    def reset(self) -> None:
        with self._lock:
            self._counts = [0] * (len(self._bounds) + 1)
            self._sum_s = 0.0


FSYNC_STATS = FsyncStats()
"""The process's fsync latencies: every GroupCommitter records into it by default."""
