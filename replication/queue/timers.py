"""`Timers`: the port through which a synchronous driver asks to be called back later.

Deadlines are readings of the injected `Clock`'s monotonic time
(segments/clock.py): asyncio's loop in production (logbroker/cluster/loop_timers.py),
the node's tick-driven timers in the simulation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Timers(Protocol):
    def call_at(self, monotonic_ms: int, action: Callable[[], None]) -> TimerHandle: ...
