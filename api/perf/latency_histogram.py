"""`LatencyHistogram`: latencies in microseconds, in fixed memory (HDR-like buckets).

Values below 128 us have a bucket each; above, every power of two is cut into
64 buckets, so a percentile is off by at most 1/64 (1.6 %) of its value,
whatever the number of samples. Values past `MAX_US` (about 19 hours) count
in the last bucket. The exact maximum, count and sum are kept beside the
buckets, so `max_us` and `mean_us` are exact.

Invariant: `count == sum(buckets)`; memory is `BUCKETS` integers, fixed.
"""

from __future__ import annotations

SUB_BITS = 6
SUB = 1 << SUB_BITS  # buckets per power of two
LINEAR = 2 * SUB  # values below this have a bucket each
MAX_US = (1 << 36) - 1
BUCKETS = LINEAR + (MAX_US.bit_length() - SUB_BITS - 1) * SUB


def bucket_of(value_us: int) -> int:
    value = min(max(value_us, 0), MAX_US)
    if value < LINEAR:
        return value
    shift = value.bit_length() - SUB_BITS - 1
    return LINEAR + (shift - 1) * SUB + (value >> shift) - SUB


def highest_in(bucket: int) -> int:
    """The largest value that falls in `bucket`."""
    if bucket < LINEAR:
        return bucket
    shift, top = divmod(bucket - LINEAR, SUB)
    return ((top + SUB + 1) << (shift + 1)) - 1


class LatencyHistogram:
    def __init__(self) -> None:
        self._buckets = [0] * BUCKETS
        self.count = 0
        self.max_us = 0
        self._sum_us = 0

    def record(self, value_us: int) -> None:
        value = max(value_us, 0)
        self._buckets[bucket_of(value)] += 1
        self.count += 1
        self._sum_us += value
        self.max_us = max(self.max_us, value)

    def percentile(self, percent: float) -> int:
        """The value at or below which `percent` of the samples are (0 if there are none)."""
        if self.count == 0:
            return 0
        rank = max(1, -(-int(percent * self.count * 1000) // 100_000))  # ceil, in integers
        seen = 0
        for bucket, hits in enumerate(self._buckets):
            seen += hits
            if seen >= rank:
                return min(highest_in(bucket), self.max_us)
        return self.max_us

    @property
    def mean_us(self) -> float:
        return self._sum_us / self.count if self.count else 0.0

    def clear(self) -> None:
        self._buckets = [0] * BUCKETS
        self.count = self.max_us = self._sum_us = 0
