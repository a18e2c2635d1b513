"""`FollowerReplica`: a follower's copy of a queue on disk.

Theory of operation. A follower's queue directory holds the same files as
its leader's: the segment log (`log/`), the cursor log (`cursor`) and the
epoch history (`epochs`). The follower appends the leader's batches as they
are (same offsets, same bytes, CRC checked), makes them durable, and only
then reports the new end in its next fetch, so the leader never counts a
copy that a crash could take back. Acks arrive as the leader's whole range
set, never as a replay of events: the follower appends what it lacks to its
cursor log. Segments below the leader's log start are deleted here too.

Acks taken in the fetch loop (`take_acks`) are fsynced at most every
`CURSOR_SYNC_INTERVAL_MS`, the leader's own cursor policy (`interval:200`,
losing one only means a redelivery), not before each next fetch: that fsync
ran on the event loop once per answer, in series with the log's, and at 1,000
msg/s it blocked each follower's loop for about a second in eight (median
0.8 ms, p99 10 ms on the busy 2-core VM), with every fetch, and so the high
watermark and the leader's deliveries, waiting behind it. The cursor is synced
after the log on the fsync thread when due (`plan_sync` decides on the loop,
with the loop's clock), on the loop when acks alone came for twice that long,
and on `close`.

Nothing here serves clients: a follower is promoted by closing this and
opening the queue shell on the same directory.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

from replication.queue.epoch_history import EpochHistory, EpochStart
from replication.queue.replication_leader import Truncate, follower_cut
from segments.cursor_log import CursorLog
from segments.errors import LogClosedError
from segments.filesystem import FileSystem
from segments.log import Log, LogConfig
from segments.range_set import RangeSet
from segments.record_batch import RecordBatch
from segments.sync_point import SegmentsSyncPoint

CURSOR_SYNC_INTERVAL_MS = 200


class FollowerReplica:
    def __init__(self, fs: FileSystem, directory: str, log: Log, cursor: CursorLog,
                 history: EpochHistory) -> None:
        self._fs = fs
        self.directory = directory
        self.log = log
        self.cursor = cursor
        self.history = history
        # As last heard from the leader; None until then (after a restart: not known).
        self.high_watermark: int | None = None
        self.acked_version = -1  # the leader's cursor version fully applied here
        self.closed = False
        self._cursor_unsynced_since_ms: int | None = None  # oldest ack not yet fsynced
        self._sync_cursor_too = False  # set by `plan_sync`, read by `sync` on its thread

    @classmethod
    def open(cls, fs: FileSystem, directory: str,
             config: LogConfig | None = None) -> FollowerReplica:
        fs.makedirs(directory)
        log = Log.open(fs, os.path.join(directory, "log"), config)
        cursor = CursorLog.open(fs, os.path.join(directory, "cursor"))
        cursor.forget_from(log.next_offset)
        history = EpochHistory.load(fs, directory)
        history.truncate_from(log.next_offset + 1)  # epochs whose records were lost
        return cls(fs, directory, log, cursor, history)

    @property
    def next_offset(self) -> int:
        return self.log.next_offset

    @property
    def log_start(self) -> int:
        return self.log.log_start_offset

    @property
    def last_epoch(self) -> int:
        return self.history.latest_epoch

    # -------------------------------------------------------------- changes

    def truncate(self, verdict: Truncate) -> int:
        """Cut the divergent tail; return the new end.

        A cut below this log's start (it deleted more than this leader did) leaves
        nothing that is known to match: the log starts over, empty, at the cut.
        """
        cut = follower_cut(verdict, self.history, self.log.next_offset)
        if cut < self.log.log_start_offset:
            self.log.truncate_fully_and_start_at(cut)
        else:
            self.log.truncate_to(cut)  # syncs
        if self.cursor.forget_from(cut):
            self.cursor.sync()
        self.history.truncate_from(cut)
        self.history.save(self._fs, self.directory)
        self.acked_version = -1
        return cut

    def reset(self, start_offset: int) -> None:
        """Below the leader's log start: start over, empty, at `start_offset`."""
        self.log.truncate_fully_and_start_at(start_offset)
        self.cursor.forget_from(0)
        self.cursor.append([(0, start_offset)] if start_offset else [])
        self.cursor.sync()
        self.history.truncate_from(0)
        self.history.save(self._fs, self.directory)
        self.acked_version = -1

    def append(self, batches: Sequence[bytes], epochs: Sequence[EpochStart]) -> None:
        """Append the leader's batches (not yet durable: `sync` before reporting).

        The epochs they belong to are saved first: unsynced records may survive a
        crash, and one that survived without its epoch would pass for a record of the
        epoch before, which the leader's check cannot tell from its own (a promoted
        replica would then let its followers keep another leader's records). A crash
        after the save leaves an epoch whose records were lost, which `open` forgets.
        """
        end = RecordBatch(batches[-1]).next_offset if batches else self.log.next_offset
        if self._adopt_epochs(epochs, end):
            self.history.save(self._fs, self.directory)
        for data in batches:
            self.log.append_raw_batch(data)

    def _adopt_epochs(self, epochs: Sequence[EpochStart], end: int) -> bool:
        changed = False
        for entry in epochs:
            if entry.epoch > self.history.latest_epoch and entry.start_offset < end:
                changed |= self.history.begin(entry.epoch, entry.start_offset)
        return changed

    def plan_sync(self, now_ms: int) -> None:
        """On the loop, before `sync` is handed to a thread: whether it syncs the cursor
        too (its oldest unsynced ack is `CURSOR_SYNC_INTERVAL_MS` old)."""
        since = self._cursor_unsynced_since_ms
        self._sync_cursor_too = since is not None and now_ms - since >= CURSOR_SYNC_INTERVAL_MS

    def sync_point(self) -> SegmentsSyncPoint | None:
        """`sync` as the log's sync point, when that is all `sync` would do (no cursor
        sync planned): its `run`, or an fdatasync of its `fds`, then its `finish`,
        stand for `sync`. None: call `sync`."""
        return None if self._sync_cursor_too else self.log.sync_point()

    def sync(self) -> None:
        """Make appended batches durable, and the cursor when `plan_sync` said so (may
        run on another thread: nothing else touches the replica meanwhile)."""
        self.log.sync()
        if self._sync_cursor_too:
            self._sync_cursor()

    def _sync_cursor(self) -> None:
        self.cursor.sync()
        self._cursor_unsynced_since_ms = None
        self._sync_cursor_too = False

    def apply_acks(self, ranges: Sequence[tuple[int, int]], version: int) -> None:
        """Take the leader's acked ranges, durable when this returns; only those below
        this log's end are kept."""
        if self._append_acks(ranges, version):
            self._sync_cursor()

    def take_acks(self, ranges: Sequence[tuple[int, int]], version: int, now_ms: int
                  ) -> None:
        """`apply_acks` for the fetch loop: durable within `CURSOR_SYNC_INTERVAL_MS` (by
        a later `sync`) rather than at once; synced here only when acks alone came for
        twice that long (no log sync to go with)."""
        if self._append_acks(ranges, version) and self._cursor_unsynced_since_ms is None:
            self._cursor_unsynced_since_ms = now_ms
        since = self._cursor_unsynced_since_ms
        if since is not None and now_ms - since >= 2 * CURSOR_SYNC_INTERVAL_MS:
            self._sync_cursor()

    def _append_acks(self, ranges: Sequence[tuple[int, int]], version: int) -> bool:
        """Append the acked ranges below this log's end that the cursor lacks; whether
        there were any."""
        end = self.log.next_offset
        wanted = RangeSet(r for r in ((lo, min(hi, end)) for lo, hi in ranges) if r[0] < r[1])
        missing: list[tuple[int, int]] = []
        for lo, hi in wanted:
            missing.extend(self.cursor.acked.missing_in(lo, hi))
        if missing:
            self.cursor.append(missing)
        clipped = any(hi > end for _, hi in ranges)
        if not clipped:
            self.acked_version = version
        return bool(missing)

    def follow_log_start(self, leader_log_start: int) -> None:
        """Delete whole segments the leader deleted (retention is the leader's decision)."""
        if leader_log_start > self.log.log_start_offset:
            self.log.delete_before(min(leader_log_start, self.log.next_offset))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._cursor_unsynced_since_ms is not None:
            # A clean stop keeps every ack; a failing disk only costs redeliveries.
            with contextlib.suppress(OSError, LogClosedError):
                self._sync_cursor()
        self.log.close()
        self.cursor.close()
