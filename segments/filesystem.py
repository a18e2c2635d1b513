"""The file system seam.

Storage code never calls `open` or `os.*` directly: it goes through a
`FileSystem`. `RealFileSystem` maps the calls onto the operating system;
`segments.memory_filesystem.MemoryFileSystem` keeps files in memory and can
simulate a crash (unsynced writes lost, the last write torn) so the
simulation tests can drive storage deterministically from a seed.

The interface is deliberately small and append-oriented: files are only
appended to, truncated, read at a position, and synced. Anything that must be
replaced as a whole is written to a new file and renamed over the old one
(`write_file_atomically`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Sequence
from typing import Protocol

from segments.errors import DataDirLockedError
from segments.space_reservation import reservation_supported, reserve, reserve_ahead_bytes
from segments.zero_fill import fill_end, write_zeros


class FileHandle(Protocol):
    """An open file that is appended to at its end and read at any position."""

    @property
    def path(self) -> str: ...

    def size(self) -> int:
        """Current length in bytes, including unsynced appends."""
        ...

    def append(self, data: bytes) -> None:
        """Write `data` at the end. On error part of it may have been written."""
        ...

    def append_parts(self, parts: Sequence[bytes]) -> None:
        """Write `parts` at the end, back to back, without joining them first."""
        ...

    def read_at(self, position: int, length: int) -> bytes:
        """Up to `length` bytes from `position`; shorter only at the end of the file."""
        ...

    def truncate(self, size: int) -> None:
        """Cut the file to `size` bytes (unsynced until `sync`)."""
        ...

    def release_space(self) -> None:
        """Give back disk space held beyond the end for appends (a sealed segment),
        zeros written by `fill_ahead` included."""
        ...

    def fill_ahead(self, end_max: int) -> None:
        """When few are left, write zeros ahead of the end for appends to overwrite,
        never past `end_max` (see `zero_fill`); `size` does not change. Only a
        file's single writer may fill."""
        ...

    def sync(self) -> None:
        """Make every write and truncation so far durable (fsync)."""
        ...

    def close(self) -> None: ...


class DirectoryLock(Protocol):
    def release(self) -> None: ...


class FileSystem(Protocol):
    def open(self, path: str) -> FileHandle:
        """Open for append and read, creating the file if it does not exist."""
        ...

    def exists(self, path: str) -> bool: ...

    def file_size(self, path: str) -> int: ...

    def listdir(self, path: str) -> list[str]: ...

    def makedirs(self, path: str) -> None: ...

    def remove(self, path: str) -> None: ...

    def rename(self, source: str, destination: str) -> None:
        """Atomically replace `destination` with `source`."""
        ...

    def sync_dir(self, path: str) -> None:
        """Make creations, removals and renames in directory `path` durable."""
        ...

    def lock_dir(self, path: str) -> DirectoryLock:
        """Take an exclusive lock on directory `path` or raise DataDirLockedError."""
        ...


def write_file_atomically(fs: FileSystem, path: str, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file."""
    temporary_path = path + ".tmp"
    if fs.exists(temporary_path):
        fs.remove(temporary_path)
    handle = fs.open(temporary_path)
    try:
        handle.append(data)
        handle.sync()
    finally:
        handle.close()
    fs.rename(temporary_path, path)
    fs.sync_dir(os.path.dirname(path) or ".")


_IOV_MAX = 1024
_LEFTOVER_SLACK_BYTES = 64 << 10


class RealFileHandle:
    """A file descriptor opened O_APPEND; reads use pread so they never move the write end.

    A growing file gets disk blocks reserved ahead of its end (see
    `space_reservation`); `_reserved_end` is where that reservation stops.
    Once the handle has filled zeros ahead of the end (`fill_ahead`, see
    `zero_fill`), the file is longer than the data: `_size` is the data's end,
    `_filled_end` the file's, and appends write at `_size` with `pwritev`
    (O_APPEND is cleared, since Linux would append a pwrite at the file's end).
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        status = os.fstat(self._fd)
        self._size = status.st_size
        self._reserving = reservation_supported()
        self._reserved_end = self._size
        self._filled_end = self._size
        self._positional = False  # True once O_APPEND is off (see fill_ahead)
        # Far more blocks than the data needs (beyond the last partial block and
        # extent-tree blocks): a process that died while holding a reservation; the
        # first `release_space` gives them back.
        self._leftover_reservation = status.st_blocks * 512 > self._size + _LEFTOVER_SLACK_BYTES

    @property
    def path(self) -> str:
        return self._path

    def size(self) -> int:
        return self._size

    def append(self, data: bytes) -> None:
        self.append_parts((data,))

    def append_parts(self, parts: Sequence[bytes]) -> None:
        total = sum(map(len, parts))
        end = self._size + total
        if end > self._reserved_end and end > self._filled_end and self._reserving:
            self._reserve(end)
        try:
            if len(parts) > _IOV_MAX:
                written = 0
            elif self._positional:
                written = os.pwritev(self._fd, parts, self._size)
            else:
                written = os.writev(self._fd, parts)
            if written != total:
                self._write_rest(parts, written)
        except BaseException:
            # After a short write or an error the size must be read back. Bytes
            # written into filled zeros are past `_size` and count for nothing.
            if not self._positional:
                self._size = os.fstat(self._fd).st_size
            raise
        self._size = end
        if end > self._filled_end:
            self._filled_end = end

    def _write_rest(self, parts: Sequence[bytes], written: int) -> None:
        """Finish a short or oversized write, part by part."""
        pending = [memoryview(part) for part in parts if part]
        position = self._size + written
        while pending:
            while pending and written >= len(pending[0]):
                written -= len(pending[0])
                pending.pop(0)
            if pending:
                pending[0] = pending[0][written:]
                if self._positional:
                    written = os.pwritev(self._fd, pending[:_IOV_MAX], position)
                else:
                    written = os.writev(self._fd, pending[:_IOV_MAX])
                position += written

    def fill_ahead(self, end_max: int) -> None:
        end = fill_end(self._size, self._filled_end, end_max)
        if end is None:
            return
        if not self._positional:
            flags = fcntl.fcntl(self._fd, fcntl.F_GETFL)
            fcntl.fcntl(self._fd, fcntl.F_SETFL, flags & ~os.O_APPEND)
            self._positional = True
        self._filled_end = write_zeros(self._fd, max(self._filled_end, self._size), end)

    def _reserve(self, needed_end: int) -> None:
        ahead = reserve_ahead_bytes(self._size)
        if not ahead:
            return
        start = max(self._reserved_end, self._size)
        outcome = reserve(self._fd, start, needed_end + ahead - start)
        if outcome is None:
            self._reserving = False
        elif outcome:
            self._reserved_end = needed_end + ahead

    def read_at(self, position: int, length: int) -> bytes:
        return os.pread(self._fd, length, position)

    def truncate(self, size: int) -> None:
        # Also frees blocks reserved past the end (truncating to the same size, too).
        os.ftruncate(self._fd, size)
        self._size = size
        self._reserved_end = size
        self._filled_end = size
        self._leftover_reservation = False

    def release_space(self) -> None:
        if self._filled_end > self._size:
            # Zeros past the data are this handle's own (only the writer fills).
            self.truncate(self._size)
        elif self._reserved_end > self._size or self._leftover_reservation:
            # The file's own size, not ours: should another handle have appended,
            # cutting to a stale size would lose its data.
            self.truncate(os.fstat(self._fd).st_size)

    def sync(self) -> None:
        # fdatasync also flushes the file size, which is all the metadata an
        # append-only file needs to read its data back; it skips mtime updates.
        os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            try:
                with contextlib.suppress(OSError):  # only space, never data, is at stake
                    self.release_space()
            finally:
                os.close(self._fd)
                self._fd = -1


class RealDirectoryLock:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


class RealFileSystem:
    """The operating system's files."""

    def open(self, path: str) -> RealFileHandle:
        return RealFileHandle(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def file_size(self, path: str) -> int:
        return os.path.getsize(path)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def remove(self, path: str) -> None:
        os.remove(path)

    def rename(self, source: str, destination: str) -> None:
        os.replace(source, destination)

    def sync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def lock_dir(self, path: str) -> RealDirectoryLock:
        # flock locks belong to the open file description, so a second open of the
        # same directory in this process is refused too: one owner per directory.
        fd = os.open(os.path.join(path, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise DataDirLockedError(path) from error
            raise
        return RealDirectoryLock(fd)
