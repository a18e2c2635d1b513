"""`SyncPoint`: one fsync of a log, taken on the event loop and run on a worker thread.

A group committer that waits for a whole fsync before writing the next group
makes every message that arrives during the fsync wait for it before it is
even written (and so deliverable). Splitting the sync lets the fsync run while
later groups are written: `take` runs on the loop and fixes what the fsync
must cover (the segments rolled since the last sync, the active segment, the
directory if it changed); `run` does the blocking work on the fsync thread and
touches only what `take` fixed, so appends may go on meanwhile; `finish` runs
back on the loop, after a successful `run`, to record the result.

Invariant: everything appended before `take` is durable when `run` returns.
Appends made after it may or may not be; the next sync point covers them.
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

    def finish(self) -> None:
        """On the loop, after `run` succeeded."""
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

    def finish(self) -> None:
        self.on_finish(self)
