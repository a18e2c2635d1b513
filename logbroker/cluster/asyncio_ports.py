"""The asyncio side shared by the cluster's drivers' ports: tasks and timers.

`TaskSet` holds the tasks the ports start, so stopping the node cancels
them all; `LoopTimers` is the `call_at` port on the running loop, in the
injected clock's monotonic milliseconds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from segments.clock import Clock

logger = logging.getLogger(__name__)


class TaskSet:
    """Tasks started for the cluster node, cancelled together when it stops."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[Any]] = set()

    def spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("cluster task failed: %s", task.exception())

    async def cancel_all(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class LoopTimers:
    """Timers on the running event loop, in the clock's monotonic milliseconds."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._handles: set[asyncio.TimerHandle] = set()

    def call_at(self, monotonic_ms: int, action: Callable[[], None]) -> None:
        delay_s = max(0, monotonic_ms - self._clock.monotonic_ms()) / 1000
        handle: asyncio.TimerHandle

        def fire() -> None:
            self._handles.discard(handle)
            action()
        handle = asyncio.get_running_loop().call_later(delay_s, fire)
        self._handles.add(handle)

    def cancel_all(self) -> None:
        for handle in self._handles:
            handle.cancel()
        self._handles.clear()
