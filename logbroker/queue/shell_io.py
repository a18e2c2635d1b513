"""`ShellIO`: the ports through which a `QueueShell` moves bytes and time.

Why: the shell decides synchronously (what is ready, delivered, confirmed,
settled); everything that waits goes through these ports. `LoopShellIO`
runs them on asyncio (group committers with their fsync threads, the loop's
timers, segment deletion on a worker thread); the deterministic simulation
runs the same shell over its own (tests/sim/leader_ports.py), whose
coroutines never suspend.

- `log_commits`, `cursor_commits`: appends to the log and to the cursor log,
  durable by callback (commit_port.py);
- `reclaimer`: deletes settled segments (settle_writer.py);
- `call_soon`, `call_later`, `gather`: the shell's pump, its core's timer,
  the settle writer's gathering window;
- `settles_durable`, `drain`, `close`: what the shell awaits (a transaction's
  acks on disk; the writes under way before closing; the committers' close).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Protocol

from logbroker.queue.commit_port import CommitPort
from logbroker.queue.fsync_policy import FsyncPolicy
from logbroker.queue.group_commit import GroupCommitter
from logbroker.queue.segment_reclaimer import SegmentReclaimer
from logbroker.queue.settle_writer import (
    CURSOR_FSYNC,
    SETTLE_GATHER_S,
    Ranges,
    Reclaimer,
    SettleWriter,
)
from segments.cursor_log import CursorLog
from segments.filesystem import FileSystem
from segments.log import AppendResult, Log
from segments.record_batch import Record

__all__ = ["Handle", "LoopShellIO", "ShellIO"]


class Handle(Protocol):
    def cancel(self) -> None: ...


class ShellIO(Protocol):
    @property
    def log_commits(self) -> CommitPort[Sequence[Record], AppendResult]: ...

    @property
    def cursor_commits(self) -> CommitPort[Ranges, None]: ...

    @property
    def reclaimer(self) -> Reclaimer: ...

    def after_write(self, action: Callable[[], None]) -> None:
        """Run `action` after each log write's callbacks (the shell pumps what they made
        ready at once, not a loop iteration later)."""
        ...

    def call_soon(self, action: Callable[[], None]) -> Handle: ...

    def call_later(self, delay_s: float, action: Callable[[], None]) -> Handle: ...

    def gather(self, flush: Callable[[], None]) -> None: ...

    async def settles_durable(self, settler: SettleWriter) -> None:
        """Every settle so far is written, reported and synced."""
        ...

    async def drain(self, settler: SettleWriter) -> None:
        """The settles gathered so far are written, and the reclaims under way done."""
        ...

    async def close(self) -> None:
        """Finish and sync every write submitted; refuse new ones."""
        ...


class LoopShellIO:
    def __init__(self, fs: FileSystem, log: Log, cursor: CursorLog, policy: FsyncPolicy
                 ) -> None:
        self._log_committer: GroupCommitter[Sequence[Record], AppendResult] = (
            GroupCommitter(log, policy))
        self._cursor_committer: GroupCommitter[Ranges, None] = (
            GroupCommitter(cursor, CURSOR_FSYNC))
        self._reclaimer = SegmentReclaimer(fs, log, self._log_committer)

    @property
    def log_commits(self) -> GroupCommitter[Sequence[Record], AppendResult]:
        return self._log_committer

    @property
    def cursor_commits(self) -> GroupCommitter[Ranges, None]:
        return self._cursor_committer

    @property
    def reclaimer(self) -> SegmentReclaimer:
        return self._reclaimer

    def after_write(self, action: Callable[[], None]) -> None:
        self._log_committer.after_write = action

    def call_soon(self, action: Callable[[], None]) -> asyncio.Handle:
        return asyncio.get_running_loop().call_soon(action)

    def call_later(self, delay_s: float, action: Callable[[], None]) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(delay_s, action)

    def gather(self, flush: Callable[[], None]) -> None:
        asyncio.get_running_loop().call_later(SETTLE_GATHER_S, flush)

    async def settles_durable(self, settler: SettleWriter) -> None:
        await _written(settler)
        await self._cursor_committer.sync()

    async def drain(self, settler: SettleWriter) -> None:
        with contextlib.suppress(Exception):  # a failed write is its own to report
            await _written(settler)
        await self._reclaimer.drain()

    async def close(self) -> None:
        await self._log_committer.close()
        self._reclaimer.close()
        await self._cursor_committer.close()


def _written(settler: SettleWriter) -> asyncio.Future[None]:
    """Resolved once every settle so far is written and reported; failed with the error
    of the last write if it failed."""
    written: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def landed(error: BaseException | None) -> None:
        if written.done():
            return
        if error is None:
            written.set_result(None)
        else:
            written.set_exception(error)
    settler.flush()
    settler.when_written(landed)
    return written
