"""`RunStats`: what the producers and consumers of a run counted, shared by them all.

Totals only grow. Latencies go to two histograms: the interval's (the sampler
reads and clears it each second) and the whole run's (the summary reads it).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from api.perf.latency_histogram import LatencyHistogram


@dataclass
class Counts:
    sent: int = 0
    confirmed: int = 0
    nacked: int = 0
    returned: int = 0
    received: int = 0

    def copy(self) -> Counts:
        return Counts(**{f.name: getattr(self, f.name) for f in fields(self)})


@dataclass
class RunStats:
    counts: Counts = field(default_factory=Counts)
    interval: LatencyHistogram = field(default_factory=LatencyHistogram)
    total: LatencyHistogram = field(default_factory=LatencyHistogram)
    last_received_ms: int | None = None

    def received(self, latency_us: int, now_ms: int) -> None:
        self.counts.received += 1
        self.interval.record(latency_us)
        self.total.record(latency_us)
        self.last_received_ms = now_ms
