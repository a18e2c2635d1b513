"""Memory and disk alarms, as RabbitMQ raises them, and their sampling shell.

RabbitMQ blocks publishing connections (connection.blocked) while the node's
memory use is above its high watermark (default: 40% of RAM here, as in
RabbitMQ before 4.0) or the free disk space of its data directory is below
`disk_free_limit` (default 50 MB), and unblocks them when the resource
recovers. `ResourceAlarms` decides from samples (pure); `ResourceMonitor`
takes the samples once a second and tells the listeners what changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger(__name__)

MEMORY = "memory"
DISK = "disk"
REASONS = {MEMORY: "low on memory", DISK: "low on disk"}


@dataclass(frozen=True)
class Watermarks:
    memory_high_bytes: int | None
    disk_free_limit_bytes: int = 50_000_000


class ResourceAlarms:
    def __init__(self, watermarks: Watermarks) -> None:
        self.watermarks = watermarks
        self.active: frozenset[str] = frozenset()

    def update(self, rss_bytes: int, disk_free_bytes: int) -> bool:
        """Take a sample; True when the set of active alarms changed."""
        active = set()
        high = self.watermarks.memory_high_bytes
        if high is not None and rss_bytes > high:
            active.add(MEMORY)
        if disk_free_bytes < self.watermarks.disk_free_limit_bytes:
            active.add(DISK)
        changed = frozenset(active) != self.active
        self.active = frozenset(active)
        return changed

    @property
    def reason(self) -> str:
        """The text connection.blocked carries, RabbitMQ's wording."""
        return " & ".join(REASONS[name] for name in sorted(self.active))


def default_memory_watermark() -> int | None:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None
    return int(total * 0.4)


def rss_bytes() -> int:
    with contextlib.suppress(OSError), open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class ResourceMonitor:
    def __init__(self, alarms: ResourceAlarms, data_dir: str, interval_s: float = 1.0) -> None:
        self.alarms = alarms
        self._data_dir = data_dir
        self._interval_s = interval_s
        self._listeners: list[Callable[[frozenset[str]], None]] = []
        self._task: asyncio.Task[None] | None = None

    def subscribe(self, listener: Callable[[frozenset[str]], None]) -> None:
        self._listeners.append(listener)

    def sample(self) -> None:
        free = shutil.disk_usage(self._data_dir).free
        if self.alarms.update(rss_bytes(), free):
            if self.alarms.active:
                logger.warning("resource alarm: %s; blocking publishers", self.alarms.reason)
            else:
                logger.info("resource alarms cleared; unblocking publishers")
            for listener in self._listeners:
                listener(self.alarms.active)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(OSError):
                self.sample()
            await asyncio.sleep(self._interval_s)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
