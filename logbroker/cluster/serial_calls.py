"""`SerialCalls`: a driver enters its core one call at a time.

A port may answer at once, from inside the effect being carried out (a local
status, a refused proposal): its call is queued and runs after the current
one's effects, so the core never sees a call nested in another. After
`stop`, calls are dropped.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable


class SerialCalls:
    def __init__(self) -> None:
        self._queue: deque[Callable[[], None]] = deque()
        self._running = False
        self.stopped = False

    def run(self, call: Callable[[], None]) -> None:
        if self.stopped:
            return
        self._queue.append(call)
        if self._running:
            return  # the loop below takes it after the current call
        self._running = True
        try:
            while self._queue and not self.stopped:
                self._queue.popleft()()
        finally:
            self._running = False

    def stop(self) -> None:
        self.stopped = True
        self._queue.clear()
