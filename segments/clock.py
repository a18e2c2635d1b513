"""`Clock`: the one source of time, injected; `ManualClock` for tests and the simulation.

Two readings, never mixed: `monotonic_ms` for timers, timeouts, leases and rates
(it never goes back and does not follow the wall clock's steps), `wall_ms` for
what a user reads as a date (message timestamps, `since` fields, expiry written
to disk). Pure cores take `now_ms` as an argument; the shell that drives them
reads it here, so a test drives them with a `ManualClock` and no sleep.

It lives in the lowest layer so that every layer can take it: storage stamps
records with wall time, replication and the broker time their loops.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    def monotonic_ms(self) -> int:
        """Milliseconds of a clock that never goes back (for intervals only)."""
        ...

    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch (for timestamps people read)."""
        ...


class SystemClock:
    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000


SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """Time that moves only when told: `advance` moves both readings together."""

    def __init__(self, monotonic_ms: int = 0, wall_ms: int = 1_700_000_000_000) -> None:
        self._monotonic_ms = monotonic_ms
        self._wall_ms = wall_ms

    def monotonic_ms(self) -> int:
        return self._monotonic_ms

    def wall_ms(self) -> int:
        return self._wall_ms

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("a monotonic clock does not go back")
        self._monotonic_ms += ms
        self._wall_ms += ms

    def set_wall(self, wall_ms: int) -> None:
        """Step the wall clock (NTP, an operator) without moving the monotonic one."""
        self._wall_ms = wall_ms
