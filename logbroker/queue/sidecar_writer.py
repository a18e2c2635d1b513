"""`SidecarWriter`: writes the meta sidecar of each segment the queue's log seals.

Theory of operation. After every log write (and settle) the shell calls
`wrote`, which looks (in O(1): the log's segment count and start offset, and a
follower's high watermark) whether the log rolled or dropped segments since
it last looked. If it did, the segments
sealed since get in line, the sidecars of segments no longer in the log are
removed, and the writer reads the oldest sealed segment in line back a chunk
(`chunk_bytes`) per turn of the shell's loop (`call_soon`), so a 64 MiB
segment never stalls deliveries, then writes its sidecar. `finish` (a clean
stop) does what is left at once, so a restart after SIGTERM reads only
sidecars and the active segment.

The records are read back from the log rather than remembered as they are
written: that keeps the publish path as it is, and the reads hit the page
cache the write just filled. A follower's copy (`settled_below`: its high
watermark) only gets sidecars for segments wholly below it: above it a
replica may still cut its log back and write other messages at the same
offsets.

Invariants: at most one turn is scheduled; every sealed segment of the log
is either in `_written` (a sidecar was there at open or has been written) or
in line; a sidecar is written only once its segment's facts are complete.
Nothing here is needed for correctness: a sidecar missed (a crash, a read
error) is rebuilt by the next open (queue_recovery.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from logbroker.queue.meta_sidecar import (
    base_offset_of,
    remove_sidecars,
    sidecar_directory,
    sidecar_path,
    write_sidecar,
)
from logbroker.queue.segment_facts import SegmentFacts
from segments.errors import (
    CorruptSegmentError,
    LogClosedError,
    OffsetDeletedError,
    OffsetOutOfRangeError,
)
from segments.filesystem import FileSystem
from segments.log import Log
from segments.record_batch import BatchFormatError

__all__ = ["SidecarWriter"]
logger = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
_GIVE_UP = (CorruptSegmentError, LogClosedError, OffsetDeletedError, OffsetOutOfRangeError,
            BatchFormatError, OSError, ValueError)


class SidecarWriter:
    def __init__(self, fs: FileSystem, queue_directory: str, log: Log,
                 call_soon: Callable[[Callable[[], None]], object],
                 chunk_bytes: int = CHUNK_BYTES,
                 settled_below: Callable[[], int] | None = None) -> None:
        self._fs = fs
        self._directory = sidecar_directory(queue_directory)
        self._log = log
        self._call_soon = call_soon
        self._chunk_bytes = chunk_bytes
        self._settled_below = settled_below
        fs.makedirs(self._directory)
        self._written = {base for name in fs.listdir(self._directory)
                         if (base := base_offset_of(name)) is not None}
        self._line: list[tuple[int, int, int]] = []  # (base, next offset, bytes), oldest first
        self._facts: SegmentFacts | None = None  # of `_line[0]`, as far as read
        self._seen = (-1, -1, -1)
        self._scheduled = False
        self.closed = False

    def wrote(self) -> None:
        """The log was written to: if it sealed a segment, start on its sidecar."""
        if self.closed:
            return
        if self._looks() != self._seen:
            self._look()
        if self._line and not self._scheduled:
            self._scheduled = True
            self._call_soon(self._turn)

    def close(self) -> None:
        """Stop without writing what is left (the next open reads those segments)."""
        self.closed = True

    def finish(self) -> None:
        """Write every sidecar still in line now (a clean stop), then stop."""
        if self.closed:
            return
        self._look()
        while self._line:
            self._step(self._chunk_bytes)
        self.closed = True

    def _looks(self) -> tuple[int, int, int]:
        """What, when it changes, may change the line (O(1): this is per write)."""
        limit = self._settled_below() if self._settled_below is not None else -1
        return self._log.segment_count, self._log.log_start_offset, limit

    def _look(self) -> None:
        self._seen = self._looks()
        sealed = {base: (next_offset, size)
                  for base, next_offset, size, _ in self._log.segment_summaries()[:-1]}
        gone = self._written - sealed.keys()
        if gone:
            self._written -= gone
            try:
                remove_sidecars(self._fs, self._directory, self._written)
            except OSError as error:
                logger.warning("removing stale sidecars in %s: %s", self._directory, error)
        limit = self._seen[2] if self._settled_below is not None else None
        self._line = [(base, *sealed[base]) for base in sorted(sealed)
                      if base not in self._written
                      and (limit is None or sealed[base][0] <= limit)]
        if self._facts is not None and (not self._line
                                        or self._facts.base_offset != self._line[0][0]):
            self._facts = None

    def _turn(self) -> None:
        self._scheduled = False
        if self.closed:
            return
        self._step(self._chunk_bytes)
        if self._line:
            self._scheduled = True
            self._call_soon(self._turn)

    def _step(self, chunk_bytes: int) -> None:
        """Read one chunk of the oldest segment in line; write its sidecar if complete."""
        base, next_offset, size = self._line[0]
        facts = self._facts if self._facts is not None else SegmentFacts(base)
        self._facts = facts
        try:
            batches = self._log.read_batches(facts.next_offset, chunk_bytes)
            if not batches:
                raise ValueError(f"segment {base} ends before {next_offset}")
            facts.add_batches(batches, next_offset)
            if facts.next_offset < next_offset:
                return
            write_sidecar(self._fs, sidecar_path(self._directory, base), facts, size)
            self._written.add(base)
        except _GIVE_UP as error:  # the next open reads this segment instead
            logger.warning("no meta sidecar for segment %d of %s: %s", base,
                           self._log.directory, error)
        self._line.pop(0)
        self._facts = None
