"""A segment: one `.log` file of batches plus its `.index` and `.timeindex`.

A log's last segment is *active*: it takes appends, and its indexes live in
memory (they are rebuilt by the recovery scan that every open performs on it).
Older segments are *sealed*: their data was fsynced and their index files
written when they were rolled, and those indexes are loaded lazily on the
first read, checked, and rebuilt from the data if missing or inconsistent.

Invariants:
- `size` is the byte length of whole, valid batches; nothing else is in the file
  once `append_encoded` or `recover` returns.
- `next_offset` = `base_offset` + records in the segment (offsets are dense).
- Index entries point only at batch boundaries below `size`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator

from segments.batch_scanner import ScanStop, scan_batches
from segments.errors import CorruptSegmentError, DiskFullError
from segments.filesystem import FileHandle, FileSystem
from segments.offset_index import OffsetIndex
from segments.real_file_handle import RealFileHandle
from segments.record_batch import (
    PREFIX_SIZE,
    EncodedBatch,
    RecordBatch,
    batch_size_from_prefix,
)
from segments.time_index import TimeIndex

NAME_DIGITS = 20


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:0{NAME_DIGITS}d}{suffix}"


def _bytes_before_zeros(handle: FileHandle, start: int, end: int, chunk_bytes: int = 1 << 20
                        ) -> int:
    """How much of `[start, end)` precedes its trailing zeros: zeros filled ahead of
    the data (see `zero_fill`) were never data, so only the rest counts as cut.
    Read backwards a chunk at a time, so a long damaged tail costs no more memory."""
    chunk_end = end
    while chunk_end > start:
        chunk_start = max(start, chunk_end - chunk_bytes)
        kept = len(handle.read_at(chunk_start, chunk_end - chunk_start).rstrip(b"\0"))
        if kept:
            return chunk_start + kept - start
        chunk_end = chunk_start
    return 0


class Segment:
    def __init__(
        self, fs: FileSystem, directory: str, base_offset: int, index_interval_bytes: int
    ) -> None:
        self.fs = fs
        self.base_offset = base_offset
        self.log_path = os.path.join(directory, segment_file_name(base_offset, ".log"))
        self.index_path = os.path.join(directory, segment_file_name(base_offset, ".index"))
        self.time_index_path = os.path.join(
            directory, segment_file_name(base_offset, ".timeindex")
        )
        self.index_interval_bytes = index_interval_bytes
        self.next_offset = base_offset
        self.size = 0
        self.first_timestamp_ms: int | None = None
        self.max_timestamp_ms: int | None = None
        self._handle: FileHandle | None = None
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._bytes_since_index_entry = 0
        # True when the indexes were built by scanning the data, so they cannot lie.
        self._indexes_scanned = False

    # ----------------------------------------------------------------- opening

    @classmethod
    def create(cls, fs: FileSystem, directory: str, base_offset: int, interval: int) -> Segment:
        segment = cls(fs, directory, base_offset, interval)
        segment._offset_index = OffsetIndex()
        segment._time_index = TimeIndex()
        segment.handle().truncate(0)
        return segment

    @classmethod
    def sealed(
        cls, fs: FileSystem, directory: str, base_offset: int, next_offset: int, interval: int
    ) -> Segment:
        """An older segment; nothing is read until it is used."""
        segment = cls(fs, directory, base_offset, interval)
        segment.next_offset = next_offset
        segment.size = fs.file_size(segment.log_path)
        return segment

    @classmethod
    def recover(
        cls, fs: FileSystem, directory: str, base_offset: int, interval: int
    ) -> tuple[Segment, int]:
        """Open the active segment: validate every batch, cut a torn or corrupt tail.

        Returns the segment and the number of bytes cut off before any zeros
        that were filled ahead of the data.
        """
        segment = cls(fs, directory, base_offset, interval)
        handle = segment.handle()
        file_size = handle.size()
        segment._offset_index = OffsetIndex()
        segment._time_index = TimeIndex()
        valid_end = segment._index_from(0, expected_base=base_offset)
        if valid_end == file_size:
            return segment, 0
        cut = _bytes_before_zeros(handle, valid_end, file_size)
        handle.truncate(valid_end)
        handle.sync()
        return segment, cut

    def _index_from(self, position: int, expected_base: int) -> int:
        """Scan batches from `position`, adding index entries; return where valid data ends."""
        handle = self.handle()
        next_offset = expected_base
        try:
            for batch_position, batch in scan_batches(handle, position):
                if batch.base_offset != next_offset:
                    break  # a batch from before a truncation, or garbage that passed the CRC
                self._note_batch(batch_position, batch.base_offset, batch.record_count,
                                 batch.first_timestamp_ms, batch.max_timestamp_ms, batch.size)
                next_offset = batch.next_offset
        except ScanStop:
            pass
        return self.size

    def _note_batch(
        self, position: int, base_offset: int, count: int, first_ts: int, max_ts: int, size: int
    ) -> None:
        assert self._offset_index is not None and self._time_index is not None
        self._indexes_scanned = True
        relative = base_offset - self.base_offset
        if position == 0 or self._bytes_since_index_entry >= self.index_interval_bytes:
            self._offset_index.append(relative, position)
            if position and self.max_timestamp_ms is not None:
                self._time_index.append(self.max_timestamp_ms, relative)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += size
        if self.first_timestamp_ms is None:
            self.first_timestamp_ms = first_ts
        if self.max_timestamp_ms is None or max_ts > self.max_timestamp_ms:
            self.max_timestamp_ms = max_ts
        self.next_offset = base_offset + count
        self.size = position + size

    def handle(self) -> FileHandle:
        if self._handle is None:
            self._handle = self.fs.open(self.log_path)
        return self._handle

    # ------------------------------------------------------------------ writes

    def append_encoded(self, batches: list[EncodedBatch]) -> None:
        """Write encoded consecutive batches in one system call; all or nothing."""
        handle = self.handle()
        start = self.size
        parts = [part for batch in batches for part in (batch.head, batch.payload)]
        try:
            handle.append_parts(parts)
        except OSError as error:
            handle.truncate(start)  # a partial write must not stay behind
            if error.errno == errno.ENOSPC:
                raise DiskFullError(self.log_path) from error
            raise
        position = start
        for batch in batches:
            size = batch.size
            self._note_batch(position, batch.base_offset, batch.record_count,
                             batch.first_timestamp_ms, batch.max_timestamp_ms, size)
            position += size

    def sync(self) -> None:
        self.handle().sync()

    def sync_fd(self) -> int | None:
        """The descriptor whose fdatasync is this segment's `sync` when its file is a real
        one (None otherwise); whoever fdatasyncs it reports back with `synced`."""
        handle = self.handle()
        return handle.sync_fd() if isinstance(handle, RealFileHandle) else None

    def synced(self) -> None:
        """The file was synced, by `sync` or by an fdatasync of `sync_fd`."""
        if isinstance(self._handle, RealFileHandle):
            self._handle.synced()

    def seal(self) -> None:
        """The segment stops being active: its time index gets its closing sentinel,
        and its file is cut to its data (a real handle keeps space ahead of its
        appends, see `real_file_handle`; a sealed file must end where its data does)."""
        if self._handle is not None:
            self._handle.truncate(self.size)
        _, time_index = self.indexes()
        if self.max_timestamp_ms is not None:
            time_index.append(self.max_timestamp_ms, self.next_offset - self.base_offset)

    def confirm_seal(self) -> None:
        """Make a sealed segment durable, then write its index files.

        Index files that pass their checks are the proof that the data under them
        was fsynced, which is what lets recovery skip this segment.
        """
        self.sync()
        self._write_index_files(*self.indexes())

    def has_confirmed_indexes(self) -> bool:
        """True when index files were written after the data was made durable."""
        try:
            offset_index = OffsetIndex.from_bytes(self._read_whole(self.index_path))
            time_index = TimeIndex.from_bytes(self._read_whole(self.time_index_path))
        except (OSError, ValueError):
            return False
        return offset_index.is_consistent(self.size) and time_index.is_consistent(
            self.next_offset - self.base_offset
        )

    def remove_index_files(self) -> None:
        for path in (self.time_index_path, self.index_path):
            if self.fs.exists(path):
                self.fs.remove(path)

    def _write_index_files(self, offset_index: OffsetIndex, time_index: TimeIndex) -> None:
        # Indexes are derived data: a crash mid-write is caught by the checks on load.
        for path, data in ((self.index_path, offset_index.to_bytes()),
                           (self.time_index_path, time_index.to_bytes())):
            handle = self.fs.open(path)
            try:
                handle.truncate(0)
                handle.append(data)
                handle.sync()
            finally:
                handle.close()

    def truncate_to(self, offset: int) -> RecordBatch | None:
        """Drop records at or past `offset`; returns the batch that straddled it, if any.

        The caller re-appends the kept part of a straddling batch.
        """
        position = self._position_for(offset)
        straddling: RecordBatch | None = None
        for batch_position, batch in self._batches_from(position):
            if batch.next_offset > offset:
                position = batch_position
                if batch.base_offset < offset:
                    straddling = batch
                break
        else:
            return None
        self.handle().truncate(position)
        self._reset_state_and_reindex()
        return straddling

    def _reset_state_and_reindex(self) -> None:
        self._offset_index = OffsetIndex()
        self._time_index = TimeIndex()
        self.size = 0
        self.next_offset = self.base_offset
        self.first_timestamp_ms = None
        self.max_timestamp_ms = None
        self._bytes_since_index_entry = 0
        self._index_from(0, expected_base=self.base_offset)

    def reactivate(self) -> None:
        """Make a sealed segment the active one again (after a truncation)."""
        self._reset_state_and_reindex()

    # ------------------------------------------------------------------- reads

    def indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        """The indexes, loaded from disk or rebuilt on first use."""
        if self._offset_index is None or self._time_index is None:
            self._offset_index, self._time_index = self._load_indexes()
        return self._offset_index, self._time_index

    def _load_indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        record_count = self.next_offset - self.base_offset
        try:
            offset_index = OffsetIndex.from_bytes(self._read_whole(self.index_path))
            time_index = TimeIndex.from_bytes(self._read_whole(self.time_index_path))
            if offset_index.is_consistent(self.size) and time_index.is_consistent(record_count):
                self.max_timestamp_ms = time_index.max_timestamp_ms()
                self._indexes_scanned = False
                return offset_index, time_index
        except (OSError, ValueError):
            pass
        return self._rebuild_indexes()

    def _read_whole(self, path: str) -> bytes:
        if not self.fs.exists(path):
            raise FileNotFoundError(path)
        handle = self.fs.open(path)
        try:
            return handle.read_at(0, handle.size())
        finally:
            handle.close()

    def _rebuild_indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        self._offset_index = OffsetIndex()
        self._time_index = TimeIndex()
        expected_size, expected_next = self.size, self.next_offset
        self.size, self.next_offset, self._bytes_since_index_entry = 0, self.base_offset, 0
        self.first_timestamp_ms = self.max_timestamp_ms = None
        self._index_from(0, expected_base=self.base_offset)
        complete = self.size == expected_size and self.next_offset == expected_next
        # A sealed segment that no longer scans to its end keeps its known bounds, so
        # reads past the damage raise CorruptSegmentError instead of skipping offsets.
        self.size, self.next_offset = expected_size, expected_next
        offset_index, time_index = self._offset_index, self._time_index
        if complete and self.max_timestamp_ms is not None:
            time_index.append(self.max_timestamp_ms, self.next_offset - self.base_offset)
            self.sync()  # index files vouch for durable data (see confirm_seal)
            self._write_index_files(offset_index, time_index)
        return offset_index, time_index

    def _batches_from(
        self, position: int, chunk_bytes: int = 1 << 16
    ) -> Iterator[tuple[int, RecordBatch]]:
        """Valid batches from `position`; corruption inside `size` raises CorruptSegmentError."""
        try:
            yield from scan_batches(self.handle(), position, self.size, chunk_bytes)
        except ScanStop as stop:
            raise CorruptSegmentError(self.log_path, stop.position, stop.reason) from stop

    def read_batches(self, offset: int, max_bytes: int) -> list[RecordBatch]:
        """Batches holding `offset` and after, up to about `max_bytes` (at least one).

        Corruption after the first returned batch ends the list early; corruption
        before it raises CorruptSegmentError.
        """
        position = self._position_for(offset)
        result: list[RecordBatch] = []
        total = 0
        try:
            for _, batch in self._batches_from(position, min(max(max_bytes, 1 << 16), 1 << 22)):
                if batch.next_offset <= offset:
                    continue
                if result and total + batch.size > max_bytes:
                    break
                result.append(batch)
                total += batch.size
                if total >= max_bytes:
                    break
        except CorruptSegmentError:
            if not result:
                raise
        return result

    def _position_for(self, offset: int) -> int:
        """Byte position of a batch at or before `offset`, checked against the data.

        An index that passed the structural checks can still point at the wrong
        batch (bit rot inside the file); reading from there would skip offsets.
        The batch header names its own offset, so one header read catches it.
        """
        offset_index, _ = self.indexes()
        relative, position = offset_index.lookup(offset - self.base_offset)
        if position == 0 or self._indexes_scanned:
            return position
        prefix = self.handle().read_at(position, PREFIX_SIZE)
        if len(prefix) == PREFIX_SIZE:
            base_offset, _ = batch_size_from_prefix(prefix)
            if base_offset == self.base_offset + relative:
                return position
        offset_index, _ = self._rebuild_indexes()
        return offset_index.lookup(offset - self.base_offset)[1]

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """First offset whose record timestamp is >= `timestamp_ms`, or None."""
        _, time_index = self.indexes()
        if self.max_timestamp_ms is None or self.max_timestamp_ms < timestamp_ms:
            return None
        position = self._position_for(self.base_offset + time_index.scan_start(timestamp_ms))
        for _, batch in self._batches_from(position):
            if batch.max_timestamp_ms < timestamp_ms:
                continue
            for record in batch.records():
                if record.timestamp_ms >= timestamp_ms:
                    return record.offset
        return None

    # --------------------------------------------------------------- lifecycle

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def release_indexes(self) -> None:
        """Forget lazily loaded indexes of a sealed segment to bound memory."""
        self._offset_index = None
        self._time_index = None

    def delete(self) -> None:
        self.close()
        # Derived files first: a crash in between leaves a data file with no index,
        # which is rebuilt, never an index that outlives its data.
        for path in (self.index_path, self.time_index_path, self.log_path):
            if self.fs.exists(path):
                self.fs.remove(path)
