"""`Sampler`: one `Sample` per interval (a second) from the run's counts and latencies.

Each sample holds the rates over its interval (msg/s) and the latency
percentiles of the messages received in it (ms; None when none came). Samples
are kept for the output files in a bounded deque (`MAX_SAMPLES`, a day of
seconds): a longer run keeps the newest.
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

from api.perf.run_stats import RunStats

MAX_SAMPLES = 86_400
INTERVAL_MS = 1000
PERCENTILES = (50.0, 95.0, 99.0)


@dataclass(frozen=True)
class Sample:
    elapsed_s: float
    sent: float
    confirmed: float
    nacked: float
    returned: float
    received: float
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    latency_p99_ms: float | None
    latency_max_ms: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


RATE_FIELDS = ("sent", "confirmed", "nacked", "returned", "received")
LATENCY_FIELDS = ("latency_p50_ms", "latency_p95_ms", "latency_p99_ms", "latency_max_ms")
SAMPLE_FIELDS = ("elapsed_s", *RATE_FIELDS, *LATENCY_FIELDS)


def ms(value_us: int) -> float:
    return round(value_us / 1000, 3)


class Sampler:
    def __init__(self, stats: RunStats, start_ms: int, interval_ms: int = INTERVAL_MS,
                 keep: int = MAX_SAMPLES) -> None:
        self._stats, self._start_ms, self._interval_ms = stats, start_ms, interval_ms
        self._last_ms, self._last = start_ms, stats.counts.copy()
        self.next_due_ms = start_ms + interval_ms
        self.samples: deque[Sample] = deque(maxlen=keep)

    def sample(self, now_ms: int) -> Sample | None:
        """The sample of the time since the last one (None if no time passed)."""
        span_ms = now_ms - self._last_ms
        if span_ms <= 0:
            return None
        counts, latencies = self._stats.counts, self._stats.interval
        rates = [(getattr(counts, name) - getattr(self._last, name)) * 1000 / span_ms
                 for name in RATE_FIELDS]
        percentiles: list[float | None] = [None] * 4
        if latencies.count:
            percentiles = [*(ms(latencies.percentile(p)) for p in PERCENTILES),
                           ms(latencies.max_us)]
        sample = Sample(round((now_ms - self._start_ms) / 1000, 3),
                        *(round(rate, 1) for rate in rates), *percentiles)
        latencies.clear()
        self._last_ms, self._last = now_ms, counts.copy()
        while self.next_due_ms <= now_ms:
            self.next_due_ms += self._interval_ms
        self.samples.append(sample)
        return sample

    @property
    def last_ms(self) -> int:
        """When the last sample ended (the start before the first)."""
        return self._last_ms
