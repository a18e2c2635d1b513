"""`RunLimits`: when a run stops producing, and when it has drained.

Theory of operation: a run is *producing* (producers publish, consumers
consume), then *draining* (producers have stopped and their confirms are in;
consumers take what is still on its way), then done. Producing ends at the
first of: the time limit, an interrupt, every producer at its message limit
(`--pmessages`), every consumer at its limit (`--cmessages`) when there are no
producers. Draining ends at the first of: every consumer finished (its limit,
or there are none); all that was sent received and nothing more for
`SETTLE_MS`; nothing received for `IDLE_MS`; `DRAIN_MAX_MS` spent draining; a
second interrupt.

Invariants: every run ends (the time limit always exists, and draining is
bounded by `DRAIN_MAX_MS`); the reason the producing phase ended is kept for
the summary.
"""

from __future__ import annotations

from dataclasses import dataclass

SETTLE_MS = 100
IDLE_MS = 1000
DRAIN_MAX_MS = 5_000  # a consumer far behind (--consumer-rate) is not waited for long


@dataclass(frozen=True)
class Progress:
    """What the run's shell reports at a check."""

    now_ms: int
    producers_done: bool
    consumers_done: bool
    sent: int
    received: int
    last_received_ms: int | None
    interrupts: int


class RunLimits:
    def __init__(self, start_ms: int, time_limit_ms: int, has_producers: bool) -> None:
        self.start_ms, self.deadline_ms = start_ms, start_ms + time_limit_ms
        self._has_producers = has_producers
        self.stopped_by: str | None = None
        self.drain_start_ms: int | None = None

    def producing_over(self, progress: Progress) -> bool:
        """True once producing is over; `stopped_by` then says why."""
        if self.stopped_by is None:
            self.stopped_by = self._stop_reason(progress)
            if self.stopped_by is not None:
                self.drain_start_ms = progress.now_ms
        return self.stopped_by is not None

    def _stop_reason(self, progress: Progress) -> str | None:
        if progress.interrupts:
            return "interrupt"
        if progress.now_ms >= self.deadline_ms:
            return "time limit"
        if self._has_producers and progress.producers_done:
            return "producer message limit"
        if not self._has_producers and progress.consumers_done:
            return "consumer message limit"
        return None

    def drained(self, progress: Progress) -> bool:
        start = self.drain_start_ms if self.drain_start_ms is not None else progress.now_ms
        quiet_since = max(start, progress.last_received_ms or start)
        quiet_ms = progress.now_ms - quiet_since
        return (progress.interrupts > 1 or progress.consumers_done
                or (progress.received >= progress.sent and quiet_ms >= SETTLE_MS)
                or quiet_ms >= IDLE_MS or progress.now_ms - start >= DRAIN_MAX_MS)
