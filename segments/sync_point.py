"""`SyncPoint`: one fsync of a log, taken on the event loop and run on a worker thread.

A group committer that waits for a whole fsync before writing the next group
makes every message that arrives during the fsync wait for it before it is
even written (and so deliverable). Splitting the sync lets the fsync run while
later groups are written: `take` runs on the loop and fixes what the fsync
must cover (the segments rolled since the last sync, the active segment, the
directory if it changed); `run` does the blocking work on the fsync thread and
touches only what `take` fixed, so appends may go on meanwhile; `finish` runs
back on the loop, after a successful `run`, to record the result.

`fds` offers a cheaper way to do `run`: when all it would do is fdatasync the
active segment's file (nothing sealed to confirm, no directory to sync, a real
file), it returns that descriptor, and a committer may fdatasync it on a
thread that never takes the GIL (`logbroker/queue/native_fsync.py`) instead of
calling `run`; `finish` is called the same way after either.

Invariant: everything appended before `take` is durable when `run` returns
(or when every descriptor `fds` returned is fdatasynced). Appends made after
it may or may not be; the next sync point covers them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from segments.filesystem import FileSystem
    from segments.segment import Segment


class SyncPoint(Protocol):
    def run(self) -> None:
        """On the fsync thread: make durable everything appended before the point."""
        ...

    def fds(self) -> tuple[int, ...] | None:
        """Descriptors whose fdatasync, in order, is all `run` would do; None when
        `run` must be called (it has more to do, or the files have no descriptors)."""
        ...

    def finish(self) -> None:
        """On the loop, after `run` (or the fdatasync of `fds`) succeeded."""
        ...


@dataclass(slots=True)
class SegmentsSyncPoint:
    """A `Log`'s sync point: sealed segments to confirm, then the active one."""

    fs: FileSystem
    sealed: list[Segment]  # rolled, immutable, in order: confirmed first
    active: Segment
    directory: str | None  # synced when segments were created or removed
    on_finish: Callable[[SegmentsSyncPoint], None]

    def run(self) -> None:
        for segment in self.sealed:
            segment.confirm_seal()
        self.active.sync()
        if self.directory is not None:
            self.fs.sync_dir(self.directory)

    def fds(self) -> tuple[int, ...] | None:
        if self.sealed or self.directory is not None:
            return None
        fd = self.active.sync_fd()
        return None if fd is None else (fd,)

    def finish(self) -> None:
        self.active.synced()
        self.on_finish(self)
