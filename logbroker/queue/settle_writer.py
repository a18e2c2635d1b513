"""`SettleWriter`: a queue's settled ranges to its cursor log, and the segments they free.

Settles are gathered for `SETTLE_GATHER_S` and written as one cursor-log
append (a consumer acking each message would otherwise cost a write, a
syscall the event loop waits on, per ack); the cursor is synced on an
interval, since a lost settle only means a redelivery. The acks themselves
take effect at once, in the queue core; only their record waits. Once a
write lands, `on_settled(ack_floor)` tells the queue, and segments that are
wholly settled and past retention are deleted (DESIGN.md section 3): detached
under the log's committer, unlinked off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from logbroker.queue.fsync_policy import FsyncPolicy
from logbroker.queue.group_commit import GroupCommitter
from logbroker.queue.retention import Retention, SegmentSummary, reclaim_floor
from segments.clock import SYSTEM_CLOCK, Clock
from segments.cursor_log import CursorLog
from segments.filesystem import FileSystem
from segments.log import AppendResult, Log, delete_detached
from segments.record_batch import Record

CURSOR_FSYNC = FsyncPolicy.parse("interval:200")
SETTLE_GATHER_S = 0.005  # well inside the cursor's fsync interval


class SettleWriter:
    def __init__(self, fs: FileSystem, log: Log, cursor: CursorLog,
                 log_committer: GroupCommitter[Sequence[Record], AppendResult],
                 retention: Callable[[], Retention],
                 on_settled: Callable[[int], None], clock: Clock = SYSTEM_CLOCK) -> None:
        self._fs = fs
        self._clock = clock  # wall time: retention ages segments by their records' time
        self._log = log
        self._cursor = cursor
        self._log_committer = log_committer
        self._retention = retention
        self._on_settled = on_settled
        self._committer: GroupCommitter[Sequence[tuple[int, int]], None] = (
            GroupCommitter(cursor, CURSOR_FSYNC))
        self._pending: list[tuple[int, int]] = []  # settled, not yet given to the cursor
        self._background: set[asyncio.Future[None]] = set()
        self._last_write: asyncio.Future[None] | None = None
        self._reclaiming = False
        self.closed = False

    def settle(self, lo: int, hi: int) -> None:
        if self.closed:
            return
        if not self._pending:
            asyncio.get_running_loop().call_later(SETTLE_GATHER_S, self.flush)
        self._pending.append((lo, hi))

    def flush(self) -> None:
        ranges, self._pending = self._pending, []
        if ranges and not self.closed:
            # One submission per gathering at most, resolved once written (the
            # cursor syncs on an interval): no limit to wait for, and no task.
            written = self._committer.submit_nowait(ranges)
            written.add_done_callback(self._written)
            self._last_write = written  # writes resolve in submission order

    def _written(self, task: asyncio.Future[None]) -> None:
        if task.cancelled() or task.exception() is not None or self.closed:
            return
        self._on_settled(self._cursor.ack_floor)
        self.reclaim()

    async def durable(self) -> None:
        """Every settle so far is synced to disk and reported (`on_settled`)."""
        self.flush()
        if self._last_write is not None:
            await asyncio.shield(self._last_write)  # writes land in submission order
        await self._committer.sync()

    def reclaim(self) -> None:
        """Delete the segments that are settled and beyond retention (see `retention`)."""
        if self._reclaiming or self.closed:
            return
        summaries = [SegmentSummary(*s) for s in self._log.segment_summaries()]
        floor = reclaim_floor(summaries, self._cursor.ack_floor, self._clock.wall_ms(),
                              self._retention())
        if floor > self._log.log_start_offset:
            self._reclaiming = True
            self._in_background(self._reclaim(floor))

    def _in_background(self, work: Awaitable[None]) -> asyncio.Future[None]:
        # The event loop only keeps weak references to tasks: hold them until done.
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _reclaim(self, floor: int) -> None:
        try:
            async with self._log_committer.exclusive():
                if self.closed:
                    return
                detached = self._log.detach_before(floor)
            # Unlinking 64 MiB files can take tens of milliseconds: not on the loop.
            await asyncio.to_thread(delete_detached, self._fs, self._log.directory, detached)
        finally:
            self._reclaiming = False

    async def drain(self) -> None:
        """Write what is pending and wait for everything under way (before closing)."""
        self.flush()
        last = [self._last_write] if self._last_write is not None else []
        await asyncio.gather(*list(self._background), *last, return_exceptions=True)

    async def close(self) -> None:
        self.closed = True
        await self._committer.close()
