"""Shortening a log: truncation from the back (replication) and retention from the front.

`LogShortening` is the part of `Log` that removes records; it is a mixin so
the log's module stays about one concept at a time. It relies on the state and
the operations `Log` provides (declared here, abstract where they are
methods). See `log.py` for the theory of operation and the invariants, which
these operations keep: segments stay contiguous, offsets stay dense, and what
a truncation keeps is durable when it returns.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections import OrderedDict

from segments.errors import OffsetOutOfRangeError
from segments.filesystem import FileSystem
from segments.log_config import LogConfig
from segments.record_batch import Compression, Record, encode_batch_parts
from segments.segment import Segment


def delete_detached(fs: FileSystem, directory: str, segments: list[Segment]) -> None:
    """Delete the files of segments taken out of a log by `Log.detach_before`.

    Files or a directory already removed (the whole log deleted meanwhile) are fine.
    """
    with contextlib.suppress(FileNotFoundError):
        for segment in segments:
            segment.delete()
        if segments:
            fs.sync_dir(directory)


class LogShortening(ABC):
    fs: FileSystem
    directory: str
    config: LogConfig
    _segments: list[Segment]
    _bases: list[int]
    _open_sealed: OrderedDict[int, Segment]
    _unconfirmed: list[Segment]
    _directory_changes: int

    @property
    @abstractmethod
    def log_start_offset(self) -> int: ...

    @property
    @abstractmethod
    def next_offset(self) -> int: ...

    @abstractmethod
    def _check_open(self) -> None: ...

    @abstractmethod
    def _add_segment(self, segment: Segment) -> None: ...

    @abstractmethod
    def sync(self) -> None: ...

    @abstractmethod
    def roll(self) -> None: ...

    def truncate_to(self, offset: int) -> None:
        """Remove every record at or past `offset` (a replica dropping a divergent tail).

        Afterwards everything kept is durable, so a replica can report its end.
        """
        self._check_open()
        if not self.log_start_offset <= offset <= self.next_offset:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, self.next_offset)
        if offset == self.next_offset:
            self.sync()
            return
        reactivated = False
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            self._drop_last_segment()
            reactivated = True
        active = self._segments[-1]
        if reactivated:
            self._forget_sealed(active)
            active.remove_index_files()  # they would vouch for it if it is sealed again
            active.reactivate()
        straddling = active.truncate_to(offset)
        if straddling is not None:
            kept = [Record(r.value, r.timestamp_ms, r.key, r.headers)
                    for r in straddling.records() if r.offset < offset]
            compression = Compression(straddling.flags & 0x3)
            active.append_encoded([encode_batch_parts(straddling.base_offset, kept, compression)])
        self._directory_changes += 1
        self.sync()

    def _drop_last_segment(self) -> None:
        segment = self._segments.pop()
        self._bases.pop()
        self._forget_sealed(segment)
        segment.delete()

    def _forget_sealed(self, segment: Segment) -> None:
        self._open_sealed.pop(segment.base_offset, None)
        if segment in self._unconfirmed:
            self._unconfirmed.remove(segment)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and make `offset` its start (a replica far behind its leader)."""
        self._check_open()
        if offset < 0:
            raise ValueError("offsets are never negative")
        while self._segments:
            self._drop_last_segment()
        interval = self.config.index_interval_bytes
        self._add_segment(Segment.create(self.fs, self.directory, offset, interval))
        self.fs.sync_dir(self.directory)

    def delete_before(self, offset: int) -> int:
        """Delete whole segments whose records are all below `offset`; return how many.

        If the active segment is entirely below `offset` it is rolled first, so an
        idle, fully consumed queue gives its space back.
        """
        detached = self.detach_before(offset)
        delete_detached(self.fs, self.directory, detached)
        return len(detached)

    def detach_before(self, offset: int) -> list[Segment]:
        """Take whole segments below `offset` out of the log without deleting their files.

        Unlinking large files can take milliseconds; an owner on an event loop
        detaches here and calls `delete_detached` on another thread. Until then a
        crash merely brings the detached segments back on the next open.
        """
        self._check_open()
        active = self._segments[-1]
        if active.size and active.next_offset <= offset:
            self.roll()
        detached: list[Segment] = []
        while len(self._segments) > 1 and self._segments[0].next_offset <= offset:
            segment = self._segments.pop(0)
            self._bases.pop(0)
            self._forget_sealed(segment)
            segment.close()
            detached.append(segment)
        return detached
