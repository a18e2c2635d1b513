"""A FUSE file system that loses every write not yet fsynced when the power is cut.

    python -m tests.integration.power_loss.lossy_fs BACKING_DIR MOUNT_POINT

It passes a directory through, except for file contents: a write is kept in
this process's memory (the "disk cache") and reaches the backing file only
when the file is fsynced (fsync or fdatasync). Writing anything to the file
`/.power-cut` at the mount's root is the power cut: every unsynced write is
dropped, the count of dropped bytes is printed on stdout
(`dropped BYTES bytes of WRITES writes in FILES files`), and from then on every
operation fails with EIO, as a disk that lost power. The backing directory
then holds exactly what was synced.

A weaker adversary than a real power loss in one way, said so the test does
not claim more: names (create, mkdir, rename, unlink) and sizes set by
truncate are durable at once, as on a file system that journals its metadata
synchronously; only file *contents* are lost. The broker's own renames are
followed by a directory fsync anyway.

One thread (`nothreads`), so no locks: FUSE calls us one operation at a time.
"""

from __future__ import annotations

import errno
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import mfusepy as fuse

POWER_CUT = "/.power-cut"
STAT_FIELDS = ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size",
               "st_uid", "st_blocks", "st_blksize", "st_ino")


@dataclass
class Unsynced:
    """A file's writes since its last fsync, in order, and its size with them."""

    writes: list[tuple[int, bytes]] = field(default_factory=list)
    size: int = 0

    def overlay(self, data: bytearray, offset: int) -> None:
        """Apply the writes that overlap [offset, offset + len(data)) onto `data`."""
        end = offset + len(data)
        for start, chunk in self.writes:
            lo, hi = max(start, offset), min(start + len(chunk), end)
            if lo < hi:
                data[lo - offset:hi - offset] = chunk[lo - start:hi - start]


class LossyFs(fuse.Operations):
    use_ns = True  # times in nanoseconds, as os.utime(ns=...) takes them

    def __init__(self, root: str) -> None:
        self.root = root
        self.unsynced: dict[str, Unsynced] = {}
        self.cut = False

    def _path(self, path: str) -> str:
        if self.cut:
            raise fuse.FuseOSError(errno.EIO)
        return os.path.join(self.root, path.lstrip("/"))

    # -- names and attributes: straight through -------------------------------

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        if path == POWER_CUT:
            return {"st_mode": 0o100600, "st_nlink": 1, "st_size": 0}
        st = os.lstat(self._path(path))
        attrs = {name: getattr(st, name) for name in STAT_FIELDS}
        attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        pending = self.unsynced.get(path)
        if pending is not None:
            attrs["st_size"] = pending.size
        return attrs

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._path(path))]

    def access(self, path: str, amode: int) -> int:
        return 0 if path == POWER_CUT else (0 if os.access(self._path(path), amode) else -1)

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._path(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._path(path))
        return 0

    def unlink(self, path: str) -> int:
        os.unlink(self._path(path))
        self.unsynced.pop(path, None)
        return 0

    def rename(self, old: str, new: str) -> int:
        os.rename(self._path(old), self._path(new))
        moved = {name: pending for name, pending in self.unsynced.items()
                 if name == old or name.startswith(old + "/")}
        for name in list(self.unsynced):
            if name == new or name.startswith(new + "/"):
                del self.unsynced[name]
        for name, pending in moved.items():
            del self.unsynced[name]
            self.unsynced[new + name[len(old):]] = pending
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._path(path), mode)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        os.utime(self._path(path), ns=times)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self._path(path))
        return {name: getattr(st, name) for name in (
            "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files",
            "f_flag", "f_frsize", "f_namemax")}

    # -- contents: kept until fsync -------------------------------------------

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        if path == POWER_CUT:
            return 0
        fd = os.open(self._path(path), os.O_WRONLY | os.O_CREAT, mode)
        os.close(fd)
        return 0

    def open(self, path: str, flags: int) -> int:
        if path != POWER_CUT:
            self._path(path)
            if flags & os.O_TRUNC:
                self.truncate(path, 0)
        return 0

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        with open(self._path(path), "rb") as backing:
            backing.seek(offset)
            data = bytearray(backing.read(size))
        pending = self.unsynced.get(path)
        if pending is not None:
            wanted = max(0, min(size, pending.size - offset))
            data.extend(bytes(wanted - len(data)))
            del data[wanted:]
            pending.overlay(data, offset)
        return bytes(data)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        if path == POWER_CUT:
            self.power_cut()
            return len(data)
        backing = self._path(path)
        pending = self.unsynced.get(path)
        if pending is None:
            pending = self.unsynced[path] = Unsynced(size=os.path.getsize(backing))
        pending.writes.append((offset, bytes(data)))
        pending.size = max(pending.size, offset + len(data))
        return len(data)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        if path == POWER_CUT:
            return 0
        os.truncate(self._path(path), length)
        pending = self.unsynced.get(path)
        if pending is not None:
            pending.writes = [(start, chunk[:max(0, length - start)])
                              for start, chunk in pending.writes if start < length]
            pending.size = length
        return 0

    def fallocate(self, path: str, mode: int, offset: int, size: int, fh: int) -> int:
        raise fuse.FuseOSError(errno.EOPNOTSUPP)

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        backing = self._path(path)
        pending = self.unsynced.pop(path, None)
        fd = os.open(backing, os.O_WRONLY)
        try:
            if pending is not None:
                for start, chunk in pending.writes:
                    os.pwrite(fd, chunk, start)
            os.fsync(fd)
        finally:
            os.close(fd)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        fd = os.open(self._path(path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def release(self, path: str, fh: int) -> int:
        return 0

    def power_cut(self) -> None:
        dropped = sum(len(chunk) for p in self.unsynced.values() for _, chunk in p.writes)
        writes = sum(len(p.writes) for p in self.unsynced.values())
        print(f"dropped {dropped} bytes of {writes} writes in {len(self.unsynced)} files",
              flush=True)
        self.unsynced.clear()
        self.cut = True


def main(argv: list[str]) -> None:
    backing, mount_point = argv
    fuse.FUSE(LossyFs(os.path.abspath(backing)), mount_point, foreground=True,
              nothreads=True)


if __name__ == "__main__":
    main(sys.argv[1:])
