"""The log: an ordered list of segments in one directory, with dense offsets.

Theory of operation. Appends go to the last (active) segment; when it would
pass `segment_bytes_max`, or its first record is older than `segment_ms_max`,
it is sealed (fsynced, index files written) and a new segment starts at the
next offset, named after it. Reads find the segment by its base offset and the
batch by the sparse index. Retention removes whole segments from the front;
replication truncates from the back.

Rolling does no I/O beyond creating the new file: the sealed segment is made
durable by the next `sync` (its data is fsynced, then its index files are
written; valid index files therefore vouch for durable data). Opening takes
the directory's lock and walks back from the newest segment until it finds one
with valid index files; only the segments after it (normally just the active
one) are scanned, so the time to open does not grow with the size of the log.
If a scanned segment that is not the last ends early (a crash lost unsynced
data), the log is cut there and the newer segments are dropped: offsets stay
dense.

The segments are held by a `SegmentChain` (segment_chain.py), which also does
the surgery of both kinds of shortening and keeps track of which segments are
loaded and which wait for a sync; the log decides when to roll, sync and cut.

Invariants:
- segments are contiguous: each one's base offset is the previous one's next offset;
- `log_start_offset` = first segment's base, `next_offset` = active segment's next;
- every segment before the first unconfirmed one is durable (its index files
  were written after its data was fsynced);
- after `sync` returns, every segment is durable;
- a failed write (ENOSPC, EIO) leaves the log exactly as it was before the call.

The log is not thread-safe: one owner (an event loop) calls it; only `sync`
may run on another thread while the owner waits (see
`logbroker.queue.group_commit`).
"""

from __future__ import annotations

from collections.abc import Sequence

from segments.errors import (
    CorruptSegmentError,
    LogClosedError,
    NonSequentialBatchError,
    OffsetDeletedError,
    OffsetOutOfRangeError,
)
from segments.filesystem import DirectoryLock, FileSystem
from segments.group_encoding import encode_groups
from segments.log_config import AppendResult, LogConfig, RecoveryReport
from segments.log_recovery import recover_segments
from segments.record_batch import (
    EncodedBatch,
    LogRecord,
    Record,
    RecordBatch,
    encode_batch_parts,
)
from segments.segment import Segment
from segments.segment_chain import SegmentChain, delete_detached
from segments.sync_point import SegmentsSyncPoint

# The configuration and result types live in log_config; callers import them from here.
__all__ = ["AppendResult", "Log", "LogConfig", "RecoveryReport", "delete_detached"]


class Log:
    """See the module docstring. The segments themselves, and the surgery that
    shortens the log, are its `SegmentChain`'s; the log decides when."""

    def __init__(
        self, fs: FileSystem, directory: str, config: LogConfig, lock: DirectoryLock,
        segments: list[Segment], recovery: RecoveryReport,
    ) -> None:
        self.fs = fs
        self.directory = directory
        self.config = config
        self._lock: DirectoryLock | None = lock
        self._chain = SegmentChain(fs, directory, config.index_interval_bytes,
                                   config.open_sealed_segments_max, segments)
        # The directory changed (a segment was created or removed) since its last sync
        # when these differ; counted, so a sync cannot miss a change made during it.
        self._directory_changes = self._directory_synced = 0
        self.recovery = recovery

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        directory: str,
        config: LogConfig | None = None,
        initial_offset: int = 0,
    ) -> Log:
        """Open or create the log in `directory`, recovering the active segment."""
        fs.makedirs(directory)
        config = config or LogConfig()
        lock = fs.lock_dir(directory)
        try:
            segments, recovery = recover_segments(
                fs, directory, initial_offset, config.index_interval_bytes)
        except BaseException:
            lock.release()
            raise
        return cls(fs, directory, config, lock, segments, recovery)

    # ------------------------------------------------------------- properties

    @property
    def log_start_offset(self) -> int:
        return self._chain.first.base_offset

    @property
    def next_offset(self) -> int:
        return self._chain.active.next_offset

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._chain.all())

    @property
    def segment_count(self) -> int:
        return len(self._chain)

    def segment_summaries(self) -> list[tuple[int, int, int, int | None]]:
        """(base offset, next offset, bytes, newest timestamp) of every segment, oldest first."""
        return [(s.base_offset, s.next_offset, s.size, s.max_timestamp_ms)
                for s in self._chain.all()]

    @property
    def closed(self) -> bool:
        return self._lock is None

    def _check_open(self) -> None:
        if self._lock is None:
            raise LogClosedError(f"log {self.directory} is closed")

    # ----------------------------------------------------------------- appends

    def append(self, records: Sequence[Record], now_ms: int | None = None) -> AppendResult:
        """Append `records` as one batch; durable only after `sync`."""
        if not records:
            return self.append_group([records], now_ms)[0]
        self._check_open()
        batch = encode_batch_parts(self.next_offset, records, self.config.compression)
        self._write_batches([batch], now_ms)
        return AppendResult(batch.base_offset, batch.base_offset + batch.record_count)

    def append_group(
        self, groups: Sequence[Sequence[Record]], now_ms: int | None = None
    ) -> list[AppendResult]:
        """Append every group in one write; all or nothing.

        Groups are merged into batches of about MERGED_BATCH_BYTES, so many small
        appends (one per publisher, say) cost one encoding and one index entry.
        """
        self._check_open()
        batches, results = encode_groups(groups, self.next_offset, self.config.compression)
        if batches:
            self._write_batches(batches, now_ms)
        return results

    def _write_batches(self, batches: list[EncodedBatch], now_ms: int | None) -> None:
        """Roll if they do not fit, then write them to the active segment."""
        if len(batches) == 1:  # the usual case, without two generators
            size, latest_ms = batches[0].size, batches[0].max_timestamp_ms
        else:
            size = sum(batch.size for batch in batches)
            latest_ms = max(batch.max_timestamp_ms for batch in batches)
        self._maybe_roll(size, now_ms if now_ms is not None else latest_ms)
        self._chain.active.append_encoded(batches)

    def append_raw_batch(self, data: bytes) -> AppendResult:
        """Append a batch encoded elsewhere (a replica copying its leader), validated first."""
        self._check_open()
        batch = RecordBatch(data)
        if batch.base_offset != self.next_offset:
            raise NonSequentialBatchError(batch.base_offset, self.next_offset)
        self._maybe_roll(batch.size, batch.max_timestamp_ms)
        encoded = EncodedBatch(data, b"", batch.base_offset, batch.record_count,
                               batch.first_timestamp_ms, batch.max_timestamp_ms, len(data))
        self._chain.active.append_encoded([encoded])
        return AppendResult(batch.base_offset, batch.next_offset)

    def _maybe_roll(self, incoming_bytes: int, now_ms: int) -> None:
        active = self._chain.active
        if active.size == 0:
            return
        too_big = active.size + incoming_bytes > self.config.segment_bytes_max
        too_old = (
            self.config.segment_ms_max is not None
            and active.first_timestamp_ms is not None
            and now_ms - active.first_timestamp_ms >= self.config.segment_ms_max
        )
        if too_big or too_old:
            self.roll()

    def roll(self) -> None:
        """Seal the active segment and start a new one at `next_offset` (no-op if empty)."""
        self._check_open()
        active = self._chain.active
        if active.size == 0:
            return
        active.seal()
        self._chain.rolled(active)
        self._chain.start_segment(active.next_offset)
        self._directory_changes += 1

    def wants_sync(self) -> bool:
        """GroupAppendable: rolled segments wait for a `sync` to be confirmed; a
        committer that rarely syncs should sync soon."""
        return bool(self._chain.unconfirmed())

    def sync(self) -> None:
        """Make everything appended so far durable (rolled segments first)."""
        point = self.sync_point()
        point.run()
        point.finish()

    def sync_point(self) -> SegmentsSyncPoint:
        """A sync of everything appended so far whose `run` may overlap later appends."""
        self._check_open()
        changes = self._directory_changes

        def finish(point: SegmentsSyncPoint) -> None:
            self._chain.confirmed(point.sealed)
            self._directory_synced = max(self._directory_synced, changes)

        directory = self.directory if changes != self._directory_synced else None
        return SegmentsSyncPoint(self.fs, self._chain.unconfirmed(), self._chain.active,
                                 directory, finish)

    # ------------------------------------------------------------------- reads

    def read(self, offset: int, max_bytes: int = 1 << 20) -> list[LogRecord]:
        """Records from `offset` on, about `max_bytes` of them (at least one if any)."""
        records: list[LogRecord] = []
        for batch in self.read_batches(offset, max_bytes):
            decoded = batch.records()
            if batch.base_offset < offset:
                decoded = decoded[offset - batch.base_offset :]
            records.extend(decoded)
        return records

    def read_batches(self, offset: int, max_bytes: int = 1 << 20) -> list[RecordBatch]:
        """Whole batches from the one holding `offset`, about `max_bytes` of them."""
        self._check_open()
        self._check_readable(offset)
        batches: list[RecordBatch] = []
        total = 0
        slot = self._chain.slot_of(offset)
        while offset < self.next_offset and total < max_bytes and slot < len(self._chain):
            segment = self._chain.use(slot)
            if offset < segment.next_offset:
                try:
                    found = segment.read_batches(offset, max_bytes - total)
                except CorruptSegmentError:
                    if batches:
                        break  # return what was read before the damage
                    raise
                if not found:
                    break
                batches.extend(found)
                total += sum(batch.size for batch in found)
                offset = found[-1].next_offset
                if offset < segment.next_offset:
                    break  # the segment stopped early: budget spent or damage ahead
            slot += 1
        return batches

    def _check_readable(self, offset: int) -> None:
        if offset < self.log_start_offset:
            if offset >= 0 and self.log_start_offset > 0:
                raise OffsetDeletedError(offset, self.log_start_offset, self.next_offset)
            raise OffsetOutOfRangeError(offset, self.log_start_offset, self.next_offset)
        if offset > self.next_offset:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, self.next_offset)

    def offset_for_timestamp(self, timestamp_ms: int) -> int:
        """The first offset whose record timestamp is >= `timestamp_ms` (else `next_offset`)."""
        self._check_open()
        for slot in range(len(self._chain)):
            found = self._chain.use(slot).offset_for_timestamp(timestamp_ms)
            if found is not None:
                return found
        return self.next_offset

    # ---------------------------------------------------------------- closing

    def close(self) -> None:
        """Sync and release everything; the log cannot be used afterwards."""
        if self._lock is None:
            return
        try:
            self.sync()
        finally:
            self._chain.close()
            self._lock.release()
            self._lock = None

    # ------------------------------------------------------------- shortening

    def truncate_to(self, offset: int) -> None:
        """Remove every record at or past `offset` (a replica dropping a divergent tail).

        Afterwards everything kept is durable, so a replica can report its end.
        """
        self._check_open()
        if not self.log_start_offset <= offset <= self.next_offset:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, self.next_offset)
        if offset < self.next_offset:
            self._chain.cut_back_to(offset)
            self._directory_changes += 1
        self.sync()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and make `offset` its start (a replica far behind its leader)."""
        self._check_open()
        if offset < 0:
            raise ValueError("offsets are never negative")
        self._chain.restart_at(offset)
        self.fs.sync_dir(self.directory)

    def delete_before(self, offset: int) -> int:
        """Delete whole segments whose records are all below `offset`; return how many.

        If the active segment is entirely below `offset` it is rolled first, so an
        idle, fully consumed queue gives its space back.
        """
        detached = self.detach_before(offset)
        delete_detached(self.fs, self.directory, detached)
        return len(detached)

    def detach_before(self, offset: int) -> list[Segment]:
        """Take whole segments below `offset` out of the log without deleting their files.

        Unlinking large files can take milliseconds; an owner on an event loop
        detaches here and calls `delete_detached` on another thread. Until then a
        crash merely brings the detached segments back on the next open.
        """
        self._check_open()
        active = self._chain.active
        if active.size and active.next_offset <= offset:
            self.roll()
        return self._chain.detach_front(offset)
