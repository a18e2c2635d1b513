"""Open files and directory locks of `MemoryFileSystem` (see its theory of operation).

A handle works on an inode and keeps working after the file is removed, like
POSIX; a crash bumps the file system's epoch, which closes every older handle.
Every call runs under the file system's lock, since a group committer's fsync
thread works on files while the event loop appends to others.
"""

from __future__ import annotations

import errno
import functools
import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from segments.memory_inode import Inode

if TYPE_CHECKING:
    from segments.memory_filesystem import MemoryFileSystem

_F = TypeVar("_F", bound=Callable[..., Any])


def serialised(method: _F) -> _F:
    """Run under the file system's lock: a group committer's fsync thread (sync
    points) works on files while the event loop appends to others."""

    @functools.wraps(method)
    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._guard:
            return method(self, *args, **kwargs)

    return cast(_F, locked)


def error_of(error_type: type[OSError], code: int, path: str) -> OSError:
    return error_type(code, os.strerror(code), path)


class MemoryFileHandle:
    """A handle on an inode; it keeps working after the file is removed, like POSIX."""

    def __init__(self, fs: MemoryFileSystem, inode: Inode, path: str) -> None:
        self._fs = fs
        self._inode = inode
        self._path = path
        # A crash bumps the file system's epoch, which closes every older handle.
        self._epoch = fs._epoch
        self._closed = False

    @property
    def path(self) -> str:
        return self._path

    @property
    def _guard(self) -> threading.RLock:
        return self._fs._guard

    def _live(self) -> Inode:
        if self._closed or self._epoch != self._fs._epoch:
            raise ValueError(f"I/O operation on closed file {self._path}")
        return self._inode

    @serialised
    def size(self) -> int:
        return len(self._live().current)

    @serialised
    def append(self, data: bytes) -> None:
        self._fs._append(self._live(), self._path, data)

    @serialised
    def append_parts(self, parts: Sequence[bytes]) -> None:
        for part in parts:
            self.append(part)

    @serialised
    def read_at(self, position: int, length: int) -> bytes:
        inode = self._live()
        if position < 0 or length < 0:
            raise error_of(OSError, errno.EINVAL, self._path)
        return bytes(inode.current[position : position + length])

    @serialised
    def truncate(self, size: int) -> None:
        self._fs._truncate(self._live(), self._path, size)

    @serialised
    def sync(self) -> None:
        inode = self._live()
        self._fs._check_sync(self._path)
        inode.sync()

    @serialised
    def close(self) -> None:
        self._closed = True


class MemoryDirectoryLock:
    def __init__(self, fs: MemoryFileSystem, path: str) -> None:
        self._fs = fs
        self.path = path

    def release(self) -> None:
        self._fs._release(self)
