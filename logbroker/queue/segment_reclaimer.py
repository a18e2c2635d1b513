"""`SegmentReclaimer`: the settle writer's `Reclaimer` port on asyncio.

Segments are detached under the log's group committer (no write or fsync
runs meanwhile) and unlinked on a worker thread: unlinking 64 MiB files can
take tens of milliseconds, too long for the event loop. Their meta sidecars
(meta_sidecar.py) go with them.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence

from logbroker.queue.group_commit import GroupCommitter
from logbroker.queue.meta_sidecar import remove_sidecar, sidecar_directory, sidecar_path
from segments.filesystem import FileSystem
from segments.log import AppendResult, Log, delete_detached
from segments.record_batch import Record
from segments.segment import Segment

__all__ = ["SegmentReclaimer"]


class SegmentReclaimer:
    def __init__(self, fs: FileSystem, log: Log,
                 log_committer: GroupCommitter[Sequence[Record], AppendResult]) -> None:
        self._fs = fs
        self._log = log
        self._log_committer = log_committer
        self._background: set[asyncio.Future[None]] = set()
        self.closed = False

    def reclaim(self, floor: int, done: Callable[[], None]) -> None:
        # The event loop only keeps weak references to tasks: hold them until done.
        task = asyncio.ensure_future(self._reclaim(floor, done))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _reclaim(self, floor: int, done: Callable[[], None]) -> None:
        try:
            async with self._log_committer.exclusive():
                if self.closed:
                    return
                detached = self._log.detach_before(floor)
            await asyncio.to_thread(self._delete, detached)
        finally:
            done()

    def _delete(self, detached: list[Segment]) -> None:
        delete_detached(self._fs, self._log.directory, detached)
        # The queue's directory holds its log (queue_opening.py) and its sidecars.
        sidecars = sidecar_directory(os.path.dirname(self._log.directory))
        for segment in detached:
            remove_sidecar(self._fs, sidecar_path(sidecars, segment.base_offset))

    async def drain(self) -> None:
        """Wait for the reclaims under way (their failures are their own to report)."""
        await asyncio.gather(*list(self._background), return_exceptions=True)

    def close(self) -> None:
        self.closed = True
