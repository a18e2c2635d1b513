"""`SettleWriter`: a queue's settled ranges to its cursor log, and the segments they free.

Theory of operation. Settles are gathered for a short window (the `gather`
port calls `flush` back; `SETTLE_GATHER_S` in the broker) and written as one
cursor-log append: a consumer acking each message would otherwise cost a
write per ack. The acks themselves take effect at once, in the queue core;
only their record waits. The write goes through a `CommitPort` (the asyncio
`GroupCommitter` on the cursor, synced on an interval since a lost settle
only means a redelivery; the simulation's committer). Once a write lands,
`on_settled(ack_floor)` tells the queue, and the segments that are wholly
settled and past retention (DESIGN.md section 3, `retention.reclaim_floor`)
go to the `Reclaimer` port, one reclaim at a time.

Synchronous: the broker's asyncio edge (queue_shell.py) waits for the writes
under way with `when_written`, and the simulation drives the same object
over its own ports.

Invariants: at most one gathering window is open and at most one reclaim
runs; nothing is written or reported after `close`; `when_written` callbacks
run once every write submitted before them has landed, after its
`on_settled`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from logbroker.queue.commit_port import CommitPort
from logbroker.queue.fsync_policy import FsyncPolicy
from logbroker.queue.retention import Retention, SegmentSummary, reclaim_floor
from segments.clock import SYSTEM_CLOCK, Clock
from segments.cursor_log import CursorLog
from segments.log import Log

__all__ = ["CURSOR_FSYNC", "SETTLE_GATHER_S", "Ranges", "Reclaimer", "SettleWriter"]

CURSOR_FSYNC = FsyncPolicy.parse("interval:200")
SETTLE_GATHER_S = 0.005  # well inside the cursor's fsync interval

Ranges = Sequence[tuple[int, int]]
Landed = Callable[[BaseException | None], None]


class Reclaimer(Protocol):
    def reclaim(self, floor: int, done: Callable[[], None]) -> None:
        """Delete the log's segments below `floor` (a segment boundary); `done` after."""
        ...


class SettleWriter:
    def __init__(self, log: Log, cursor: CursorLog, committer: CommitPort[Ranges, None],
                 gather: Callable[[Callable[[], None]], object], reclaimer: Reclaimer,
                 retention: Callable[[], Retention], on_settled: Callable[[int], None],
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self._log = log
        self._cursor = cursor
        self._committer = committer
        self._gather = gather
        self._reclaimer = reclaimer
        self._retention = retention  # read at each use: a policy change replaces it
        self._on_settled = on_settled
        self._clock = clock  # wall time: retention ages segments by their records' time
        self._pending: list[tuple[int, int]] = []  # settled, not yet given to the cursor
        self._writing = 0  # writes submitted, not landed yet
        self._waiters: list[Landed] = []
        self._reclaiming = False
        self.closed = False

    def settle(self, lo: int, hi: int) -> None:
        if self.closed:
            return
        if not self._pending:
            self._gather(self.flush)
        self._pending.append((lo, hi))

    def flush(self) -> None:
        ranges, self._pending = self._pending, []
        if ranges and not self.closed:
            self._writing += 1
            self._committer.append(ranges, True, None, self._written, self._landed)

    def when_written(self, done: Landed) -> None:
        """Call `done` once every write submitted so far has landed (with the last
        failure's error, if the last write failed)."""
        if self._writing:
            self._waiters.append(done)
        else:
            done(None)

    def _written(self, _: None) -> None:
        if not self.closed:
            self._on_settled(self._cursor.ack_floor)
            self.reclaim()
        self._landed(None)

    def _landed(self, error: BaseException | None) -> None:
        self._writing -= 1
        if not self._writing:
            waiters, self._waiters = self._waiters, []
            for done in waiters:
                done(error)

    def reclaim(self) -> None:
        """Delete the segments that are settled and beyond retention (see `retention`)."""
        if self._reclaiming or self.closed:
            return
        summaries = [SegmentSummary(*s) for s in self._log.segment_summaries()]
        floor = reclaim_floor(summaries, self._cursor.ack_floor, self._clock.wall_ms(),
                              self._retention())
        if floor > self._log.log_start_offset:
            self._reclaiming = True
            self._reclaimer.reclaim(floor, self._reclaimed)

    def _reclaimed(self) -> None:
        self._reclaiming = False

    def close(self) -> None:
        self.closed = True
