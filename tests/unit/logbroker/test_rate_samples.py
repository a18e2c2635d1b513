from logbroker.rate_samples import RateSampler


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
