import time

import pytest

from segments.clock import SYSTEM_CLOCK, ManualClock


def test_system_clock_readings_are_milliseconds() -> None:
    assert abs(SYSTEM_CLOCK.wall_ms() - time.time() * 1000) < 1000
    first = SYSTEM_CLOCK.monotonic_ms()
    assert SYSTEM_CLOCK.monotonic_ms() >= first


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(monotonic_ms=10, wall_ms=5_000)
    assert (clock.monotonic_ms(), clock.wall_ms()) == (10, 5_000)
    clock.advance(250)
    assert (clock.monotonic_ms(), clock.wall_ms()) == (260, 5_250)
    clock.set_wall(1_000)
    assert (clock.monotonic_ms(), clock.wall_ms()) == (260, 1_000)
    with pytest.raises(ValueError):
        clock.advance(-1)
