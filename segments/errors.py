"""Errors raised by the storage layer.

Every error names what it is about (the log directory, the segment file, the
byte position) so an operator can act on it without a debugger.
"""

from __future__ import annotations


class StorageError(Exception):
    """Base class of every error raised by `segments`."""


class OffsetOutOfRangeError(StorageError):
    """The offset lies outside `[log_start_offset, next_offset]`."""

    def __init__(self, offset: int, log_start_offset: int, next_offset: int) -> None:
        super().__init__(
            f"offset {offset} is out of range: the log holds [{log_start_offset}, {next_offset})"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.next_offset = next_offset


class OffsetDeletedError(OffsetOutOfRangeError):
    """The offset existed once but retention has deleted it."""

    def __init__(self, offset: int, log_start_offset: int, next_offset: int) -> None:
        super().__init__(offset, log_start_offset, next_offset)
        self.args = (
            f"offset {offset} was deleted by retention: the log now starts at {log_start_offset}",
        )


class CorruptSegmentError(StorageError):
    """A batch failed its checksum or framing check."""

    def __init__(self, path: str, position: int, reason: str) -> None:
        super().__init__(f"corrupt record batch in {path} at byte {position}: {reason}")
        self.path = path
        self.position = position
        self.reason = reason


class DiskFullError(StorageError):
    """A write failed with ENOSPC; the log was rolled back to its last consistent state."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"disk full while writing {path}: the write was rolled back and the log stays "
            "readable; appends resume when space returns"
        )
        self.path = path


class DataDirLockedError(StorageError):
    """Another process (or another open log in this process) holds the directory."""

    def __init__(self, path: str) -> None:
        super().__init__(f"data directory {path} is locked by another process")
        self.path = path


class LogClosedError(StorageError):
    """The log (or cursor log) was used after `close()`."""


class NonSequentialBatchError(StorageError):
    """A pre-encoded batch does not start at the log's next offset."""

    def __init__(self, base_offset: int, next_offset: int) -> None:
        super().__init__(
            f"batch starts at offset {base_offset} but the log's next offset is {next_offset}"
        )
        self.base_offset = base_offset
        self.next_offset = next_offset
