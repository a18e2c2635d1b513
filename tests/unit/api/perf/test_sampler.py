"""`Sampler` and `summarize`: per-interval rates and latencies, and the run's totals."""

from __future__ import annotations

from api.perf.run_stats import RunStats
from api.perf.run_summary import summarize
from api.perf.sampler import Sampler


def test_a_sample_holds_the_rates_and_latencies_of_its_interval_only() -> None:
    stats = RunStats()
    sampler = Sampler(stats, start_ms=10_000)
    stats.counts.sent, stats.counts.confirmed = 120, 100
    for latency_us in (1000, 2000, 3000, 40_000):
        stats.received(latency_us, now_ms=10_500)
    first = sampler.sample(11_000)
    assert first is not None
    assert (first.elapsed_s, first.sent, first.confirmed, first.received) == (1.0, 120, 100, 4)
    assert first.latency_p50_ms is not None and 2.0 <= first.latency_p50_ms <= 2.0 * 65 / 64
    assert first.latency_max_ms == 40.0  # exact
    assert sampler.next_due_ms == 12_000
    stats.counts.sent += 50
    second = sampler.sample(11_500)  # half a second: rates per second
    assert second is not None
    assert (second.sent, second.received, second.latency_p99_ms) == (100.0, 0.0, None)
    assert [s.elapsed_s for s in sampler.samples] == [1.0, 1.5]


def test_no_time_passed_gives_no_sample() -> None:
    sampler = Sampler(RunStats(), start_ms=0)
    assert sampler.sample(0) is None


def test_the_samples_kept_are_bounded() -> None:
    sampler = Sampler(RunStats(), start_ms=0, keep=3)
    for second in range(1, 11):
        sampler.sample(second * 1000)
    assert [s.elapsed_s for s in sampler.samples] == [8.0, 9.0, 10.0]


def test_a_late_sample_moves_the_next_due_time_past_now() -> None:
    sampler = Sampler(RunStats(), start_ms=0)
    sampler.sample(3_400)
    assert sampler.next_due_ms == 4_000


def test_the_summary_has_totals_averages_and_whole_run_latencies() -> None:
    stats = RunStats()
    stats.counts.sent = stats.counts.confirmed = 1000
    for latency_us in range(1, 1001):
        stats.received(latency_us, now_ms=0)
    stats.interval.clear()  # the sampler's interval does not matter to the summary
    summary = summarize(stats, start_ms=0, producing_end_ms=2000, end_ms=2500,
                        stopped_by="time limit")
    assert (summary.sent, summary.confirmed, summary.received) == (1000, 1000, 1000)
    assert (summary.sent_rate, summary.received_rate) == (500.0, 400.0)
    assert summary.latency_max_ms == 1.0
    assert summary.latency_mean_ms == 0.5
    assert summary.latency_p50_ms is not None and 0.49 <= summary.latency_p50_ms <= 0.51
    assert summary.as_dict()["stopped_by"] == "time limit"
