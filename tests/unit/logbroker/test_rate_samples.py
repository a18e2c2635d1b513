from logbroker.rate_samples import (
    MAX_GRID_POINTS,
    RateSampler,
    rate_details,
    sample_grid,
    sum_points,
)


def test_rates_are_growth_over_the_window() -> None:
    sampler = RateSampler(window=3)
    sampler.sample(0, [("q", {"published": 0})])
    assert sampler.rates("q") == {}
    sampler.sample(5000, [("q", {"published": 50})])
    assert sampler.rates("q") == {"published": 10.0}
    sampler.sample(10_000, [("q", {"published": 150})])
    assert sampler.rates("q") == {"published": 15.0}
    sampler.sample(15_000, [("q", {"published": 150})])  # the first sample leaves the window
    assert sampler.rates("q") == {"published": 10.0}


def test_a_queue_that_is_gone_is_forgotten() -> None:
    sampler = RateSampler()
    sampler.sample(0, [("a", {"n": 1}), ("b", {"n": 1})])
    sampler.sample(1000, [("a", {"n": 3})])
    assert sampler.rates("b") == {}
    assert sampler.rates("a") == {"n": 2.0}


def test_each_object_keeps_a_bounded_history() -> None:
    sampler = RateSampler(window=3, keep=5)
    for i in range(100):
        sampler.sample(i * 5000, [("q", {"n": i})])
    grid = sample_grid(99 * 5000, 1000, 5)
    points = sampler.values_at("q", grid)
    assert [t for t, _ in points][:5] == [495_000, 490_000, 485_000, 480_000, 475_000]
    # older grid timestamps than the oldest kept sample are left out
    assert len(points) == 5 and points[-1] == (475_000, {"n": 95})
    assert len(sampler) == 1


def test_values_at_takes_the_sample_at_or_before_each_timestamp() -> None:
    sampler = RateSampler()
    sampler.sample(1000, [("q", {"n": 1})])
    sampler.sample(6000, [("q", {"n": 6})])
    sampler.sample(11_500, [("q", {"n": 11})])
    grid = sample_grid(12_000, 10, 5)
    assert grid == [10_000, 5000, 0]
    assert sampler.values_at("q", grid) == [(10_000, {"n": 6}), (5000, {"n": 1})]
    assert sampler.values_at("gone", grid) == []


def test_rate_details_are_rabbitmqs_samples_avg_and_avg_rate() -> None:
    points = [(10_000, {"n": 30}), (5000, {"n": 20}), (0, {"n": 10})]
    assert rate_details(points, "n") == {
        "samples": [{"sample": 30, "timestamp": 10_000}, {"sample": 20, "timestamp": 5000},
                    {"sample": 10, "timestamp": 0}],
        "avg": 20.0, "avg_rate": 2.0}
    assert rate_details(points[:1], "n")["avg_rate"] == 0.0
    assert rate_details([], "n") == {"samples": [], "avg": 0.0, "avg_rate": 0.0}


def test_series_of_several_objects_add_up_by_timestamp() -> None:
    a = [(10_000, {"n": 3}), (5000, {"n": 1})]
    b = [(10_000, {"n": 10, "m": 1})]
    assert sum_points([a, b]) == [(10_000, {"n": 13, "m": 1}), (5000, {"n": 1})]


def test_a_new_set_of_counters_restarts_the_history_and_a_clock_step_back_is_skipped() -> None:
    sampler = RateSampler()
    sampler.sample(0, [("q", {"n": 0})])
    sampler.sample(5000, [("q", {"n": 5})])
    sampler.sample(4000, [("q", {"n": 99})])  # the wall clock stepped back
    assert sampler.rates("q") == {"n": 1.0}
    sampler.sample(10_000, [("q", {"n": 10, "m": 0})])
    assert sampler.rates("q") == {}
    assert sampler.values_at("q", [10_000, 5000]) == [(10_000, {"n": 10, "m": 0})]


def test_grid_is_bounded() -> None:
    assert len(sample_grid(0, 10**9, 1)) == MAX_GRID_POINTS


def test_an_idle_object_keeps_one_sample_and_its_rate_falls_to_zero() -> None:
    sampler = RateSampler()  # a one-minute rate window
    sampler.sample(0, [("q", {"n": 0})])
    sampler.sample(5000, [("q", {"n": 50})])
    for i in range(2, 100):
        sampler.sample(i * 5000, [("q", {"n": 50})])
        if i == 3:
            assert sampler.rates("q") == {"n": round(50 / 15, 2)}
    assert sampler.held() == 2
    assert sampler.rates("q") == {"n": 0.0}
    grid = sample_grid(99 * 5000, 20, 5)
    assert sampler.values_at("q", grid) == [(t, {"n": 50}) for t in grid]


def test_memory_is_bounded_by_objects_times_kept_samples() -> None:
    sampler = RateSampler(keep=121)
    for i in range(300):
        sampler.sample(i * 5000, [(f"q{k}", {"n": i}) for k in range(10)])
    assert sampler.held() == 10 * 121


def test_a_round_in_parts_forgets_only_what_no_part_saw() -> None:
    sampler = RateSampler()
    sampler.sample(0, [("a", {"n": 1}), ("b", {"n": 1}), ("c", {"n": 1})])
    seen = sampler.record(5000, [("a", {"n": 2})]) | sampler.record(5000, [("b", {"n": 3})])
    sampler.forget_all_but(seen)
    assert len(sampler) == 2 and sampler.rates("b") == {"n": 0.4}
