"""`LoopTimers`: the one `Timers` port on asyncio, deadlines on the injected clock."""

from __future__ import annotations

import asyncio

from logbroker.cluster.loop_timers import LoopTimers
from segments.clock import ManualClock


async def test_a_timer_the_driver_cancels_never_fires_and_is_let_go_of() -> None:
    timers = LoopTimers(ManualClock(0))
    fired: list[int] = []
    for _ in range(200):  # a follower's fetch timeouts, each answered in time
        timers.call_at(60_000, lambda: fired.append(0)).cancel()
    kept = timers.call_at(0, lambda: fired.append(-1))
    await asyncio.sleep(0.01)
    assert fired == [-1] and not kept.cancelled()
    assert len(timers._handles) < 64  # the cancelled ones were dropped as more were set


async def test_cancel_all_stops_what_is_still_set() -> None:
    timers = LoopTimers(ManualClock(0))
    fired: list[str] = []
    timers.call_at(5, lambda: fired.append("soon"))
    timers.cancel_all()
    await asyncio.sleep(0.02)
    assert fired == []
