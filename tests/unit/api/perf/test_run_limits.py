"""`RunLimits`: producing ends at the first limit, draining is always bounded."""

from __future__ import annotations

from dataclasses import replace

from api.perf.run_limits import DRAIN_MAX_MS, IDLE_MS, SETTLE_MS, Progress, RunLimits

BUSY = Progress(now_ms=500, producers_done=False, consumers_done=False, sent=10, received=5,
                last_received_ms=500, interrupts=0)


def test_producing_goes_on_until_the_time_limit() -> None:
    limits = RunLimits(start_ms=0, time_limit_ms=1000, has_producers=True)
    assert not limits.producing_over(BUSY)
    assert limits.producing_over(replace(BUSY, now_ms=1000))
    assert (limits.stopped_by, limits.drain_start_ms) == ("time limit", 1000)


def test_producers_at_their_limit_or_an_interrupt_end_producing() -> None:
    limits = RunLimits(0, 10_000, has_producers=True)
    assert limits.producing_over(replace(BUSY, producers_done=True))
    assert limits.stopped_by == "producer message limit"
    interrupted = RunLimits(0, 10_000, has_producers=True)
    assert interrupted.producing_over(replace(BUSY, interrupts=1))
    assert interrupted.stopped_by == "interrupt"


def test_without_producers_the_consumers_limit_ends_the_run() -> None:
    limits = RunLimits(0, 10_000, has_producers=False)
    assert not limits.producing_over(replace(BUSY, producers_done=True))
    assert limits.producing_over(replace(BUSY, consumers_done=True))
    assert limits.stopped_by == "consumer message limit"


def test_the_first_reason_is_kept() -> None:
    limits = RunLimits(0, 1000, has_producers=True)
    limits.producing_over(replace(BUSY, now_ms=1000))
    limits.producing_over(replace(BUSY, now_ms=1200, interrupts=1))
    assert limits.stopped_by == "time limit"


def test_draining_ends_once_all_sent_is_received_and_quiet() -> None:
    limits = RunLimits(0, 1000, has_producers=True)
    limits.producing_over(replace(BUSY, now_ms=1000))
    caught_up = replace(BUSY, now_ms=1050, received=10, last_received_ms=1040)
    assert not limits.drained(caught_up)
    assert limits.drained(replace(caught_up, now_ms=1040 + SETTLE_MS))


def test_draining_ends_when_nothing_comes_or_after_its_maximum() -> None:
    limits = RunLimits(0, 1000, has_producers=True)
    limits.producing_over(replace(BUSY, now_ms=1000))
    lagging = replace(BUSY, received=5, last_received_ms=900)
    assert not limits.drained(replace(lagging, now_ms=1000 + IDLE_MS - 1))
    assert limits.drained(replace(lagging, now_ms=1000 + IDLE_MS))
    flowing = replace(lagging, now_ms=1000 + DRAIN_MAX_MS, last_received_ms=1000 + DRAIN_MAX_MS)
    assert limits.drained(flowing)


def test_draining_ends_at_a_second_interrupt_or_when_consumers_are_done() -> None:
    limits = RunLimits(0, 1000, has_producers=True)
    limits.producing_over(replace(BUSY, interrupts=1))
    assert not limits.drained(replace(BUSY, interrupts=1))
    assert limits.drained(replace(BUSY, interrupts=2))
    assert limits.drained(replace(BUSY, consumers_done=True))
