"""The durable ack state of one queue.

Theory of operation
-------------------
A queue's acked offsets live in memory as a `RangeSet` and on disk as an
append-only file of fixed-size entries, each saying "offsets [lo, hi) are
acked". Acking appends entries; `sync` makes them durable; opening the file
replays the entries in order to rebuild the set. Because the file only grows,
it is *compacted* by the `sync` after it has grown well past the set: the
current set is written as one entry per merged range to `path + ".tmp"`,
synced, and renamed over `path`.

Entry format (21 bytes, little-endian)::

    kind: u8   (1 = ACK_RANGE)
    lo:   u64
    hi:   u64  (lo < hi, half-open)
    crc:  u32  CRC-32C of the 17 bytes before it

Invariants
----------
* The in-memory set equals the replay of the file's contents; everything
  appended before the last successful `sync` is durable. The set is only
  changed after the bytes describing the change were written, and a failed
  write is truncated away before the error is raised.
* Between compactions the file only grows, so a crash can only lose or tear a
  suffix. Replay therefore stops at the first short, corrupt or nonsensical
  entry and truncates the file there: that tail was never acknowledged as
  durable.
* Compaction is crash-atomic: the rename is the commit point, so a crash
  leaves either the old complete file or the new complete file, and both
  replay to the same set. A leftover `.tmp` file is an interrupted compaction
  and is deleted on open.

A `CursorLog` is not thread-safe; one owner (e.g. a group committer) calls it.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
from collections.abc import Sequence

import crc32c

from segments.errors import DiskFullError, LogClosedError
from segments.filesystem import FileHandle, FileSystem, write_file_atomically
from segments.range_set import RangeSet

logger = logging.getLogger(__name__)

KIND_ACK_RANGE = 1

_BODY = struct.Struct("<BQQ")
_CRC = struct.Struct("<I")
ENTRY_SIZE = _BODY.size + _CRC.size
_MAX_U64 = 2**64 - 1
# Replay reads this many entries at a time so opening a large file does not
# need the whole file in memory at once.
_READ_ENTRIES = 4096


def encode_entry(lo: int, hi: int) -> bytes:
    body = _BODY.pack(KIND_ACK_RANGE, lo, hi)
    return body + _CRC.pack(crc32c.crc32c(body))


def decode_entry(entry: bytes) -> tuple[int, int] | None:
    """The `(lo, hi)` of a valid ACK_RANGE entry, or None if it must not be trusted."""
    if len(entry) != ENTRY_SIZE:
        return None
    body = entry[: _BODY.size]
    (crc,) = _CRC.unpack_from(entry, _BODY.size)
    if crc != crc32c.crc32c(body):
        return None
    kind, lo, hi = _BODY.unpack(body)
    if kind != KIND_ACK_RANGE or lo >= hi:
        return None
    return lo, hi


def _encode_ranges(ranges: Sequence[tuple[int, int]]) -> bytes:
    return b"".join(encode_entry(lo, hi) for lo, hi in ranges)


def _replay(handle: FileHandle, into: RangeSet) -> int:
    """Add every trusted entry to `into`; return the byte length of the trusted prefix."""
    size = handle.size()
    position = 0
    while position < size:
        chunk = handle.read_at(position, min(size - position, _READ_ENTRIES * ENTRY_SIZE))
        if not chunk:
            break
        for start in range(0, len(chunk), ENTRY_SIZE):
            decoded = decode_entry(chunk[start : start + ENTRY_SIZE])
            if decoded is None:
                return position + start
            into.add(*decoded)
        position += len(chunk)
    # A chunk ending mid-entry is caught by the short-entry check above, so
    # only whole entries reach here.
    return position


def _check_ranges(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Validate before anything is written; empty ranges are dropped (no-ops)."""
    checked: list[tuple[int, int]] = []
    for lo, hi in ranges:
        if lo < 0 or hi < 0:
            raise ValueError(f"offsets are non-negative, got [{lo}, {hi})")
        if hi > _MAX_U64:
            raise ValueError(f"offset {hi} does not fit the cursor log's u64 field")
        if lo < hi:
            checked.append((lo, hi))
    return checked


class CursorLog:
    """The acked offsets of one queue, persisted as an append-only entry file."""

    def __init__(
        self,
        fs: FileSystem,
        path: str,
        handle: FileHandle,
        acked: RangeSet,
        entry_count: int,
        compact_min_entries: int,
    ) -> None:
        """Use `CursorLog.open`; this only assembles already-recovered state."""
        self._fs = fs
        self._path = path
        self._handle = handle
        self._acked = acked
        self._entry_count = entry_count
        self._compact_min_entries = compact_min_entries
        # After a failed compaction, wait for this many entries before retrying so
        # a full disk does not turn every append into a whole-file rewrite.
        self._compact_retry_at = 0
        self._closed_reason: str | None = None

    @classmethod
    def open(cls, fs: FileSystem, path: str, compact_min_entries: int = 1024) -> CursorLog:
        if compact_min_entries < 0:
            raise ValueError(f"compact_min_entries must be >= 0, got {compact_min_entries}")
        temporary_path = path + ".tmp"
        if fs.exists(temporary_path):
            # An interrupted compaction: the rename never happened, so `path` is intact.
            fs.remove(temporary_path)
            fs.sync_dir(os.path.dirname(path) or ".")
        handle = fs.open(path)
        try:
            acked = RangeSet()
            trusted_size = _replay(handle, acked)
            if trusted_size < handle.size():
                logger.warning(
                    "cursor log %s: dropping %d untrusted bytes at byte %d",
                    path,
                    handle.size() - trusted_size,
                    trusted_size,
                )
                handle.truncate(trusted_size)
            # Sync even without a truncation: bytes that survived a process crash
            # may still be only in the page cache, and the set now depends on them.
            handle.sync()
        except BaseException:
            handle.close()
            raise
        return cls(fs, path, handle, acked, trusted_size // ENTRY_SIZE, compact_min_entries)

    # -- properties ---------------------------------------------------------

    @property
    def path(self) -> str:
        return self._path

    @property
    def closed(self) -> bool:
        return self._closed_reason is not None

    @property
    def acked(self) -> RangeSet:
        """The live acked set. Callers must not mutate it: it must match the file."""
        self._check_open()
        return self._acked

    @property
    def ack_floor(self) -> int:
        self._check_open()
        return self._acked.ack_floor

    @property
    def entry_count(self) -> int:
        """Entries currently in the file (trusted ones, including unsynced appends)."""
        self._check_open()
        return self._entry_count

    # -- writing ------------------------------------------------------------

    def append(self, ranges: Sequence[tuple[int, int]]) -> None:
        """Ack `ranges`; durable after the next `sync`. Raises DiskFullError on ENOSPC."""
        self._check_open()
        self._write(_check_ranges(ranges))

    def append_group(self, items: Sequence[Sequence[tuple[int, int]]]) -> list[None]:
        """`append` for several callers with one write; a failure fails them all."""
        self._check_open()
        combined = [checked for ranges in items for checked in _check_ranges(ranges)]
        self._write(combined)
        return [None] * len(items)

    def _write(self, ranges: list[tuple[int, int]]) -> None:
        # Ranges already covered add nothing to replay, so they need no bytes.
        # Overlaps within one batch are still written; replay merges them.
        new_ranges = [(lo, hi) for lo, hi in ranges if not self._acked.covers(lo, hi)]
        if not new_ranges:
            return
        size_before = self._handle.size()
        try:
            self._handle.append(_encode_ranges(new_ranges))
        except OSError as error:
            self._roll_back(size_before, error)
            if error.errno == errno.ENOSPC:
                raise DiskFullError(self._path) from error
            raise
        for lo, hi in new_ranges:
            self._acked.add(lo, hi)
        self._entry_count += len(new_ranges)

    def _roll_back(self, size_before: int, error: OSError) -> None:
        """Cut a partial write off so later appends do not land after a torn entry."""
        try:
            self._handle.truncate(size_before)
            # Without a durable truncation, whole entries of the failed write could
            # reappear after a crash and ack offsets the caller was told failed.
            self._handle.sync()
        except OSError as rollback_error:
            # The tail is now unknown; reopening replays whatever is really there.
            self._close_because(f"rollback after a failed append failed: {rollback_error}")
            raise rollback_error from error

    def wants_sync(self) -> bool:
        """GroupAppendable: a sync is due when the file wants compacting."""
        return not self.closed and self._compaction_due()

    def sync_point(self) -> None:
        """GroupAppendable: no syncing while appending, since compaction swaps the file."""
        return None

    def sync(self) -> None:
        """Make every append durable, compacting the file instead when it is due.

        Compaction is done here rather than on append because a group committer
        syncs on its fsync thread (holding appends back meanwhile): rewriting the
        file costs two fsyncs, which must not stall the appender's event loop.
        """
        self._check_open()
        if self._compaction_due() and self._compact_quietly():
            return  # the rewritten file is durable, and holds every append
        try:
            self._handle.sync()
        except OSError as error:
            # After a failed fsync the kernel may have dropped the dirty pages and a
            # retry can falsely succeed, so the in-memory set can no longer be trusted.
            self._close_because(f"fsync failed: {error}")
            raise

    # -- compaction ---------------------------------------------------------

    def maybe_compact(self) -> bool:
        """Compact if the file has grown well past the set it encodes; True if it did."""
        self._check_open()
        if self._entry_count <= self._compaction_threshold():
            return False
        self.compact()
        return True

    def _compaction_threshold(self) -> int:
        return max(self._compact_min_entries, 2 * len(self._acked) + 1)

    def _compaction_due(self) -> bool:
        return (self._entry_count > self._compaction_threshold()
                and self._entry_count >= self._compact_retry_at)

    def forget_from(self, offset: int) -> bool:
        """Drop acks at or past `offset` and rewrite the file; True if any were dropped.

        After a power loss the log may end before acks that reached the disk
        first (a record written but not yet fsynced, acked, then lost). Those
        acks describe nothing; left alone they would swallow the records that
        reuse their offsets.
        """
        self._check_open()
        if not self._acked or self._acked.ranges()[-1][1] <= offset:
            return False
        self._acked.remove_from(offset)
        self.compact()
        return True

    def compact(self) -> None:
        """Rewrite the file as one entry per merged range, crash-atomically."""
        self._check_open()
        ranges = self._acked.ranges()
        try:
            write_file_atomically(self._fs, self._path, _encode_ranges(ranges))
        except OSError as error:
            self._recover_from_failed_compaction()
            if error.errno == errno.ENOSPC:
                raise DiskFullError(self._path + ".tmp") from error
            raise
        self._reopen_handle()
        self._entry_count = len(ranges)
        self._compact_retry_at = 0

    def _compact_quietly(self) -> bool:
        """Compaction during a sync: its failure must not fail the sync; True if done."""
        try:
            self.compact()
        except (OSError, DiskFullError) as error:
            if self.closed:
                raise
            logger.warning("cursor log %s: compaction failed, will retry: %s", self._path, error)
            self._compact_retry_at = self._entry_count + max(self._compact_min_entries, 1)
            return False
        return True

    def _recover_from_failed_compaction(self) -> None:
        temporary_path = self._path + ".tmp"
        if self._fs.exists(temporary_path):
            # The rename did not happen: the open handle still is `path`.
            try:
                self._fs.remove(temporary_path)
            except OSError as error:
                logger.warning(
                    "cursor log %s: could not remove %s: %s", self._path, temporary_path, error
                )
            return
        # The failure may have come after the rename (syncing the directory), in
        # which case our handle is the replaced file. Both files replay to the
        # current set, so switching to whatever `path` now names is always right.
        self._reopen_handle()
        try:
            self._fs.sync_dir(os.path.dirname(self._path) or ".")
        except OSError as error:
            self._close_because(f"directory sync after compaction failed: {error}")
            raise
        self._entry_count = self._handle.size() // ENTRY_SIZE

    def _reopen_handle(self) -> None:
        self._handle.close()
        try:
            self._handle = self._fs.open(self._path)
        except OSError as error:
            self._closed_reason = f"reopening after compaction failed: {error}"
            raise

    # -- lifecycle ----------------------------------------------------------

    def close(self) -> None:
        if self._closed_reason is None:
            self._close_because("closed")

    def _close_because(self, reason: str) -> None:
        self._closed_reason = reason
        self._handle.close()

    def _check_open(self) -> None:
        if self._closed_reason is not None:
            raise LogClosedError(f"cursor log {self._path} is unusable: {self._closed_reason}")
