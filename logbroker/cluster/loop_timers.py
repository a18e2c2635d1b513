"""`LoopTimers`: the drivers' `Timers` port on the running asyncio loop.

A deadline is a reading of the injected `Clock`'s monotonic time; the loop's
own clock only counts down the delay to it. Every timer set and not yet run
is held, so stopping the node cancels them all (`cancel_all`); one a driver
cancelled itself is let go of as more are set.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from segments.clock import SYSTEM_CLOCK, Clock

__all__ = ["LoopTimers"]
_PRUNE_AT = 64  # held handles past which the ones cancelled by their driver are dropped


class LoopTimers:
    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._handles: set[asyncio.TimerHandle] = set()
        self._prune_at = _PRUNE_AT

    def call_at(self, monotonic_ms: int, action: Callable[[], None]) -> asyncio.TimerHandle:
        delay_s = max(0, monotonic_ms - self._clock.monotonic_ms()) / 1000
        handles = self._handles
        handle: asyncio.TimerHandle

        def fire() -> None:
            handles.discard(handle)
            action()
        handle = asyncio.get_running_loop().call_later(delay_s, fire)
        handles.add(handle)
        if len(handles) >= self._prune_at:
            self._prune()
        return handle

    def _prune(self) -> None:
        # Drivers cancel most of their timers (a fetch answered before its timeout).
        self._handles = {handle for handle in self._handles if not handle.cancelled()}
        self._prune_at = max(_PRUNE_AT, 2 * len(self._handles))

    def cancel_all(self) -> None:
        for handle in self._handles:
            handle.cancel()
        self._handles.clear()
