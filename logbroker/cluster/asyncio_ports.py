"""The asyncio side shared by the cluster's drivers' ports: tasks and timers.

`TaskSet` holds the tasks the ports start, so stopping the node cancels
them all; `LoopTimers` (loop_timers.py, re-exported here) is the `call_at`
port on the running loop, in the injected clock's monotonic milliseconds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from logbroker.cluster.loop_timers import LoopTimers

__all__ = ["LoopTimers", "TaskSet"]
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
