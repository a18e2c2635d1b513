"""`Pacer`: when the n-th message of a rate-limited producer or consumer is due.

The schedule is anchored at the start (message n is due at start + n / rate),
so a late message does not push back the ones after it: the average rate
holds, as in PerfTest's `--rate` and `--consumer-rate`. No rate: every
message is due at once.
"""

from __future__ import annotations


class Pacer:
    def __init__(self, rate_per_s: float | None, start_ms: int) -> None:
        if rate_per_s is not None and rate_per_s <= 0:
            raise ValueError("a rate must be above 0 (None: no limit)")
        self._rate, self._start_ms = rate_per_s, start_ms

    def due_ms(self, index: int) -> int:
        if self._rate is None:
            return self._start_ms
        return self._start_ms + int(index * 1000 / self._rate)

    def wait_ms(self, now_ms: int, index: int) -> int:
        """How long message `index` (0 is the first) must still wait."""
        return max(0, self.due_ms(index) - now_ms)
