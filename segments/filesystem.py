"""The file system seam.

Storage code never calls `open` or `os.*` directly: it goes through a
`FileSystem`. `RealFileSystem` maps the calls onto the operating system;
`segments.memory_filesystem.MemoryFileSystem` keeps files in memory and can
simulate a crash (unsynced writes lost, the last write torn) so the
simulation tests can drive storage deterministically from a seed.

The interface is deliberately small and append-oriented: files are only
appended to, truncated, read at a position, and synced. Anything that must be
replaced as a whole is written to a new file and renamed over the old one
(`write_file_atomically`). What a handle does beyond that to make appends
cheaper on a real disk (reserving blocks, zeros ahead of the data) is the real
handle's own business (`real_file_handle`), invisible through the protocol.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Sequence
from typing import Protocol

from segments.errors import DataDirLockedError
from segments.real_file_handle import RealFileHandle


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
        """Cut the file to `size` bytes (unsynced until `sync`), and give back any
        space held past them (a handle may keep some ahead of its appends)."""
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
