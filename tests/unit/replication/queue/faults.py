"""A FileSystem wrapper that cuts the power after a given number of changing operations."""

from __future__ import annotations

from collections.abc import Sequence

from segments.filesystem import DirectoryLock
from segments.memory_filesystem import MemoryFileHandle, MemoryFileSystem


class PowerCut(Exception):
    """Raised by `CountingFileSystem` when its budget of operations is spent."""


class CountingHandle:
    def __init__(self, fs: CountingFileSystem, inner: MemoryFileHandle) -> None:
        self._fs = fs
        self._inner = inner

    @property
    def path(self) -> str:
        return self._inner.path

    def size(self) -> int:
        return self._inner.size()

    def append(self, data: bytes) -> None:
        self._fs.step()
        self._inner.append(data)

    def append_parts(self, parts: Sequence[bytes]) -> None:
        self._fs.step()
        self._inner.append_parts(parts)

    def read_at(self, position: int, length: int) -> bytes:
        return self._inner.read_at(position, length)

    def truncate(self, size: int) -> None:
        self._fs.step()
        self._inner.truncate(size)

    def sync(self) -> None:
        self._fs.step()
        self._inner.sync()

    def close(self) -> None:
        self._inner.close()


class CountingFileSystem:
    """Forwards to a MemoryFileSystem; the `budget`-th changing operation cuts the power."""

    def __init__(self, inner: MemoryFileSystem, budget: int) -> None:
        self.inner = inner
        self.budget = budget
        self.steps = 0

    def step(self) -> None:
        if self.steps == self.budget:
            raise PowerCut
        self.steps += 1

    def open(self, path: str) -> CountingHandle:
        self.step()
        return CountingHandle(self, self.inner.open(path))

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def file_size(self, path: str) -> int:
        return self.inner.file_size(path)

    def listdir(self, path: str) -> list[str]:
        return self.inner.listdir(path)

    def makedirs(self, path: str) -> None:
        self.step()
        self.inner.makedirs(path)

    def remove(self, path: str) -> None:
        self.step()
        self.inner.remove(path)

    def rename(self, source: str, destination: str) -> None:
        self.step()
        self.inner.rename(source, destination)

    def sync_dir(self, path: str) -> None:
        self.step()
        self.inner.sync_dir(path)

    def lock_dir(self, path: str) -> DirectoryLock:
        return self.inner.lock_dir(path)
