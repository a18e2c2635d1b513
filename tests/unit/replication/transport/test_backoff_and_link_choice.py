import random

import pytest

from replication.transport.backoff import Backoff
from replication.transport.peer_link import keeps_new_link


def test_backoff_grows_within_bounds_and_resets() -> None:
    backoff = Backoff(0.05, 2.0, random.Random(7))
    delays = [backoff.next_delay() for _ in range(12)]
    assert delays[0] == pytest.approx(0.05)  # the first retry is prompt
    assert all(0.05 <= d <= 2.0 for d in delays)
    ceilings = [min(2.0, 0.05 * 2**n) for n in range(12)]
    assert all(d <= c for d, c in zip(delays, ceilings, strict=True))
    assert max(delays[6:]) > 0.5  # it did grow
    backoff.reset()
    assert backoff.next_delay() == pytest.approx(0.05)


def test_backoff_jitter_comes_from_the_injected_rng() -> None:
    def run(seed: int) -> list[float]:
        backoff = Backoff(0.05, 2.0, random.Random(seed))
        return [backoff.next_delay() for _ in range(8)]

    assert run(1) == run(1)
    assert run(1) != run(2)
    with pytest.raises(ValueError):
        Backoff(0.5, 0.1, random.Random())


def test_simultaneous_dial_keeps_the_link_dialed_by_the_lower_name_on_both_ends() -> None:
    # n1 < n2. Connection X dialed by n1, Y dialed by n2; whichever each end
    # authenticates first, both keep X.
    for own, peer in (("n1", "n2"), ("n2", "n1")):
        current_x_new_y = keeps_new_link(own, peer, current_dialer="n1", new_dialer="n2")
        current_y_new_x = keeps_new_link(own, peer, current_dialer="n2", new_dialer="n1")
        assert (current_x_new_y, current_y_new_x) == (False, True)


def test_a_redial_by_the_same_node_replaces_the_old_link() -> None:
    assert keeps_new_link("n1", "n2", current_dialer="n2", new_dialer="n2")
    assert keeps_new_link("n2", "n1", current_dialer="n2", new_dialer="n2")
