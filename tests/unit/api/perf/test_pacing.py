"""`Pacer`: the schedule is anchored at the start, so the average rate holds."""

from __future__ import annotations

import pytest

from api.perf.pacing import Pacer


def test_no_rate_means_no_wait() -> None:
    pacer = Pacer(None, 1000)
    assert pacer.wait_ms(1000, 10**6) == 0


def test_message_n_is_due_at_n_over_the_rate() -> None:
    pacer = Pacer(100.0, 1000)  # one every 10 ms
    assert pacer.wait_ms(1000, 0) == 0
    assert pacer.wait_ms(1000, 1) == 10
    assert pacer.wait_ms(1005, 1) == 5
    assert pacer.due_ms(50) == 1500


def test_a_late_sender_catches_up_without_waiting() -> None:
    pacer = Pacer(10.0, 0)
    assert all(pacer.wait_ms(1000, index) == 0 for index in range(11))
    assert pacer.wait_ms(1000, 11) == 100


@pytest.mark.parametrize("rate", [0.0, -1.0])
def test_a_rate_must_be_positive(rate: float) -> None:
    with pytest.raises(ValueError, match="above 0"):
        Pacer(rate, 0)
