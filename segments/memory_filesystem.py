"""An in-memory `FileSystem` that can lose power, for deterministic simulation tests.

Theory of operation. Every piece of state exists twice: as the *current* view
that reads see, and as the *durable* view that survives a crash. The gap
between the two is an ordered list of pending operations.

* A file (inode) has durable content plus pending content operations: appends
  (bytes) and truncations (a size). `handle.sync()` replays them onto the
  durable content. Invariant: durable content + every pending op == current.
* A directory has a durable name->inode mapping plus pending namespace
  operations (create, remove, rename). `sync_dir` commits them. Invariant:
  durable mapping + every pending op == current mapping.
* Namespace operations behave like a journal. A rename between two
  directories is a single entry pending in both; committing it through either
  directory (by `sync_dir` or by a crash keeping it) commits it, and every
  entry before it, in both directories. Hence a rename is always atomic: the
  destination holds either the old or the new inode, and the file is never
  in both places nor lost. Directories themselves are durable on `makedirs`.

`crash(rng)` keeps, per directory, the durable mapping plus a random prefix
of its pending operations (closed over renames as above); then, per surviving
inode, the durable content plus a random prefix of its pending operations,
where the last kept op, if a write, is torn half of the time. Afterwards everything is durable,
every handle is closed and every lock released. All random draws happen in
sorted path order, so a seed fully determines the outcome.

Simplifications: `capacity_bytes` counts the bytes of linked files only (an
open handle on a removed file writes for free), and directories cannot be
renamed or removed.
"""

from __future__ import annotations

import bisect
import errno
import posixpath
import random
import threading
from typing import TYPE_CHECKING

from segments.errors import DataDirLockedError
from segments.memory_file_handle import (
    MemoryDirectoryLock,
    MemoryFileHandle,
    error_of,
    serialised,
)
from segments.memory_inode import Directory, Inode, Link, NamespaceOp, Rename, apply_content

if TYPE_CHECKING:
    from segments.filesystem import FileSystem

__all__ = ["MemoryDirectoryLock", "MemoryFileHandle", "MemoryFileSystem"]


class MemoryFileSystem:
    """Files in memory with explicit durability; see the module docstring."""

    def __init__(self, capacity_bytes: int | None = None) -> None:
        self._guard = threading.RLock()  # see serialised
        self._capacity = capacity_bytes
        self._used = 0
        self._epoch = 0
        self._seq = 0
        self._dirs: dict[str, Directory] = {"/": Directory(), ".": Directory()}
        self._locks: dict[str, MemoryDirectoryLock] = {}
        self.fail_sync = False
        """When set, `handle.sync()` and `sync_dir` raise EIO and make nothing durable."""

    @serialised
    def open(self, path: str) -> MemoryFileHandle:
        path = posixpath.normpath(path)
        parent_path, parent, name = self._locate(path)
        inode = parent.current.get(name)
        if inode is None:
            inode = Inode()
            parent.current[name] = inode
            parent.pending.append(Link(self._next_seq(), parent_path, name, inode))
        return MemoryFileHandle(self, inode, path)

    @serialised
    def exists(self, path: str) -> bool:
        path = posixpath.normpath(path)
        if path in self._dirs:
            return True
        parent = self._dirs.get(posixpath.dirname(path) or ".")
        return parent is not None and posixpath.basename(path) in parent.current

    @serialised
    def file_size(self, path: str) -> int:
        return len(self._file(path).current)

    @serialised
    def listdir(self, path: str) -> list[str]:
        directory = self._directory(posixpath.normpath(path))
        return sorted([*directory.current, *directory.subdirs])

    @serialised
    def makedirs(self, path: str) -> None:
        path = posixpath.normpath(path)
        if path in self._dirs:
            return
        parent_path = posixpath.dirname(path) or "."
        self.makedirs(parent_path)
        parent = self._dirs[parent_path]
        name = posixpath.basename(path)
        if name in parent.current:
            raise error_of(FileExistsError, errno.EEXIST, path)
        self._dirs[path] = Directory()
        parent.subdirs.add(name)

    @serialised
    def remove(self, path: str) -> None:
        path = posixpath.normpath(path)
        parent_path, parent, name = self._locate(path)
        inode = parent.current.pop(name, None)
        if inode is None:
            raise error_of(FileNotFoundError, errno.ENOENT, path)
        self._unlink(inode)
        parent.pending.append(Link(self._next_seq(), parent_path, name, None))

    @serialised
    def rename(self, source: str, destination: str) -> None:
        source = posixpath.normpath(source)
        destination = posixpath.normpath(destination)
        inode = self._file(source)  # renaming a directory is not modelled
        source_path, source_dir, source_name = self._locate(source)
        target_path, target_dir, target_name = self._locate(destination)
        if source == destination:
            return
        replaced = target_dir.current.get(target_name)
        if replaced is not None:
            self._unlink(replaced)
        del source_dir.current[source_name]
        target_dir.current[target_name] = inode
        op = Rename(self._next_seq(), source_path, source_name, target_path, target_name, inode)
        source_dir.pending.append(op)
        if target_path != source_path:
            target_dir.pending.append(op)

    @serialised
    def sync_dir(self, path: str) -> None:
        path = posixpath.normpath(path)
        directory = self._directory(path)
        self._check_sync(path)
        cuts = dict.fromkeys(self._dirs, 0)
        cuts[path] = len(directory.pending)
        self._commit_namespace(cuts)

    @serialised
    def lock_dir(self, path: str) -> MemoryDirectoryLock:
        normalised = posixpath.normpath(path)
        self._directory(normalised)
        if normalised in self._locks:
            raise DataDirLockedError(path)
        # RealFileSystem leaves a ".lock" file behind; listing code must cope with it.
        self.open(posixpath.join(normalised, ".lock")).close()
        lock = MemoryDirectoryLock(self, normalised)
        self._locks[normalised] = lock
        return lock

    @serialised
    def set_capacity(self, capacity_bytes: int | None) -> None:
        """Limit the total bytes of all files; None means unlimited."""
        self._capacity = capacity_bytes

    @property
    @serialised
    def used_bytes(self) -> int:
        return self._used

    @serialised
    def snapshot_bytes(self, path: str) -> bytes:
        """The current content of `path`, as reads see it."""
        return bytes(self._file(path).current)

    @serialised
    def durable_bytes(self, path: str) -> bytes:
        """The synced content of the inode now at `path` (ignores namespace durability)."""
        return bytes(self._file(path).durable)

    @serialised
    def crash(self, rng: random.Random) -> None:
        """Lose power: keep durable state plus random prefixes of pending state."""
        self._power_loss(rng)

    @serialised
    def crash_losing_all_unsynced(self) -> None:
        """Lose power and every unsynced operation: only durable state survives."""
        self._power_loss(None)

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _directory(self, path: str) -> Directory:
        directory = self._dirs.get(path)
        if directory is None:
            if self.exists(path):
                raise error_of(NotADirectoryError, errno.ENOTDIR, path)
            raise error_of(FileNotFoundError, errno.ENOENT, path)
        return directory

    def _locate(self, path: str) -> tuple[str, Directory, str]:
        """The parent directory's path and state, and the file's name within it."""
        parent_path = posixpath.dirname(path) or "."
        parent = self._dirs.get(parent_path)
        if parent is None:
            raise error_of(FileNotFoundError, errno.ENOENT, path)
        if path in self._dirs:
            raise error_of(IsADirectoryError, errno.EISDIR, path)
        return parent_path, parent, posixpath.basename(path)

    def _file(self, path: str) -> Inode:
        path = posixpath.normpath(path)
        _, parent, name = self._locate(path)
        inode = parent.current.get(name)
        if inode is None:
            raise error_of(FileNotFoundError, errno.ENOENT, path)
        return inode

    def _unlink(self, inode: Inode) -> None:
        inode.linked = False
        self._used -= len(inode.current)

    def _room(self, inode: Inode) -> int | None:
        if self._capacity is None or not inode.linked:
            return None
        return max(0, self._capacity - self._used)

    def _append(self, inode: Inode, path: str, data: bytes) -> None:
        room = self._room(inode)
        written = bytes(data) if room is None or room >= len(data) else bytes(data[:room])
        if written:
            inode.current += written
            inode.pending.append(written)
            if inode.linked:
                self._used += len(written)
        if len(written) < len(data):
            raise error_of(OSError, errno.ENOSPC, path)

    def _truncate(self, inode: Inode, path: str, size: int) -> None:
        if size < 0:
            raise error_of(OSError, errno.EINVAL, path)
        growth = size - len(inode.current)
        room = self._room(inode)
        if room is not None and growth > room:
            raise error_of(OSError, errno.ENOSPC, path)
        apply_content(inode.current, size)
        inode.pending.append(size)
        if inode.linked:
            self._used += growth

    def _check_sync(self, path: str) -> None:
        if self.fail_sync:
            raise error_of(OSError, errno.EIO, path)

    def _release(self, lock: MemoryDirectoryLock) -> None:
        # Identity check: a lock from before a crash must not free its successor.
        if self._locks.get(lock.path) is lock:
            del self._locks[lock.path]

    def _close_over_renames(self, cuts: dict[str, int]) -> None:
        """Grow `cuts` until every kept rename is kept, with its predecessors, in both dirs."""
        changed = True
        while changed:
            changed = False
            for path in sorted(cuts):
                for op in self._dirs[path].pending[: cuts[path]]:
                    if not isinstance(op, Rename):
                        continue
                    for other in (op.source_dir, op.destination_dir):
                        pending = self._dirs[other].pending
                        needed = bisect.bisect_right(pending, op.seq, key=lambda o: o.seq)
                        if cuts[other] < needed:
                            cuts[other] = needed
                            changed = True

    def _commit_namespace(self, cuts: dict[str, int]) -> None:
        """Make the first `cuts[path]` pending ops of every directory durable."""
        self._close_over_renames(cuts)
        committed: dict[int, NamespaceOp] = {}
        for path, cut in cuts.items():
            pending = self._dirs[path].pending
            committed.update((op.seq, op) for op in pending[:cut])
            del pending[:cut]
        # Replaying in global order keeps a name removed and re-created in order.
        for seq in sorted(committed):
            op = committed[seq]
            if isinstance(op, Link) and op.inode is not None:
                self._dirs[op.directory].durable[op.name] = op.inode
            elif isinstance(op, Link):
                self._dirs[op.directory].durable.pop(op.name, None)
            else:
                self._dirs[op.source_dir].durable.pop(op.source_name, None)
                self._dirs[op.destination_dir].durable[op.destination_name] = op.inode

    def _power_loss(self, rng: random.Random | None) -> None:
        cuts = {
            path: rng.randint(0, len(self._dirs[path].pending)) if rng is not None else 0
            for path in sorted(self._dirs)
        }
        self._commit_namespace(cuts)
        for directory in self._dirs.values():
            for inode in directory.current.values():
                inode.linked = False
        self._used = 0
        for path in sorted(self._dirs):
            directory = self._dirs[path]
            directory.pending.clear()
            directory.current = dict(directory.durable)
            for name in sorted(directory.current):
                inode = directory.current[name]
                inode.recover(rng)
                inode.linked = True
                self._used += len(inode.current)
        self._epoch += 1
        self._locks.clear()


if TYPE_CHECKING:
    # mypy does not check the tests, so conformance to the protocol is asserted here.
    _conforms: FileSystem = MemoryFileSystem()
