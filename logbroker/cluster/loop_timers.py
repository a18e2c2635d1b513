"""`LoopTimers`: the drivers' `Timers` port on the running asyncio loop.

A deadline is a reading of the injected `Clock`'s monotonic time; the loop's
own clock only counts down the delay to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from segments.clock import SYSTEM_CLOCK, Clock


class LoopTimers:
    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock

    def call_at(self, monotonic_ms: int, action: Callable[[], None]) -> asyncio.TimerHandle:
        delay_ms = max(0, monotonic_ms - self._clock.monotonic_ms())
        return asyncio.get_running_loop().call_later(delay_ms / 1000, action)
