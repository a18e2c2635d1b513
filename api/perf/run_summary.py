"""`Summary`: the totals and averages of a whole run, printed at its end and written
with the samples."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from api.perf.run_stats import RunStats
from api.perf.sampler import ms

LATENCY_FIELDS = ("latency_p50_ms", "latency_p95_ms", "latency_p99_ms", "latency_max_ms",
                  "latency_mean_ms")


@dataclass(frozen=True)
class Summary:
    duration_s: float
    producing_s: float
    sent: int
    confirmed: int
    nacked: int
    returned: int
    received: int
    sent_rate: float
    received_rate: float
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    latency_p99_ms: float | None
    latency_max_ms: float | None
    latency_mean_ms: float | None
    stopped_by: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(stats: RunStats, start_ms: int, producing_end_ms: int, end_ms: int,
              stopped_by: str) -> Summary:
    counts, latencies = stats.counts, stats.total
    duration_s = max(end_ms - start_ms, 1) / 1000
    producing_s = max(producing_end_ms - start_ms, 1) / 1000
    latency: dict[str, float | None] = dict.fromkeys(LATENCY_FIELDS)
    if latencies.count:
        latency = {"latency_p50_ms": ms(latencies.percentile(50)),
                   "latency_p95_ms": ms(latencies.percentile(95)),
                   "latency_p99_ms": ms(latencies.percentile(99)),
                   "latency_max_ms": ms(latencies.max_us),
                   "latency_mean_ms": round(latencies.mean_us / 1000, 3)}
    return Summary(duration_s=round(duration_s, 3), producing_s=round(producing_s, 3),
                   sent=counts.sent, confirmed=counts.confirmed, nacked=counts.nacked,
                   returned=counts.returned, received=counts.received,
                   sent_rate=round(counts.sent / producing_s, 1),
                   received_rate=round(counts.received / duration_s, 1),
                   stopped_by=stopped_by, **latency)
