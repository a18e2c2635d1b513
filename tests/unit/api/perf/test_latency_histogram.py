"""`LatencyHistogram`: percentiles within its precision, exact max and mean, fixed memory."""

from __future__ import annotations

import random

import pytest

from api.perf.latency_histogram import (
    BUCKETS,
    MAX_US,
    SUB,
    LatencyHistogram,
    bucket_of,
    highest_in,
)


def test_an_empty_histogram_answers_zero() -> None:
    histogram = LatencyHistogram()
    assert (histogram.count, histogram.percentile(99), histogram.max_us,
            histogram.mean_us) == (0, 0, 0, 0.0)


def test_small_values_are_exact() -> None:
    histogram = LatencyHistogram()
    for value in range(1, 101):
        histogram.record(value)
    assert histogram.percentile(50) == 50
    assert histogram.percentile(99) == 99
    assert histogram.percentile(100) == 100
    assert histogram.mean_us == 50.5


@pytest.mark.parametrize("value", [0, 1, 127, 128, 129, 255, 256, 1000, 123_456, 10**9, MAX_US])
def test_every_value_falls_in_a_bucket_whose_top_is_within_its_precision(value: int) -> None:
    bucket = bucket_of(value)
    assert 0 <= bucket < BUCKETS
    top = highest_in(bucket)
    assert value <= top <= value + value // SUB + 1
    assert bucket == 0 or highest_in(bucket - 1) < value


def test_percentiles_of_random_latencies_are_within_one_and_a_half_percent() -> None:
    draw = random.Random(7)
    values = sorted(int(draw.lognormvariate(7, 1.2)) for _ in range(20_000))
    histogram = LatencyHistogram()
    for value in values:
        histogram.record(value)
    for percent in (50, 95, 99, 99.9):
        exact = values[max(0, -(-int(percent * len(values)) // 100) - 1)]
        assert exact <= histogram.percentile(percent) <= exact * (1 + 1 / SUB) + 1
    assert histogram.max_us == values[-1]
    assert histogram.mean_us == pytest.approx(sum(values) / len(values))


def test_huge_and_negative_values_are_clamped_and_max_stays_exact() -> None:
    histogram = LatencyHistogram()
    histogram.record(-5)
    histogram.record(MAX_US * 4)
    assert histogram.count == 2
    assert histogram.percentile(1) == 0
    assert histogram.max_us == MAX_US * 4


def test_clear_forgets_everything() -> None:
    histogram = LatencyHistogram()
    histogram.record(500)
    histogram.clear()
    assert (histogram.count, histogram.max_us, histogram.percentile(50)) == (0, 0, 0)
