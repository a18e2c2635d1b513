"""The segment chain: a log's segments, oldest first, and which of them are loaded.

Theory of operation. A log's records live in a chain of segments with
consecutive offset ranges. The chain grows at the back when the log rolls
(`start_segment`), loses whole segments at the front when retention detaches
them (`detach_front`), and is cut at the back when a replica drops a
divergent tail (`cut_back_to`) or starts over at a new offset (`restart_at`).
`Log` decides when each of these happens (it rolls, syncs and checks
offsets); the chain does the surgery on the segments and keeps its two
bookkeeping sets right through every change:

- the *unconfirmed* segments: rolled, waiting for the sync that fsyncs their
  data and writes their index files (`rolled`, then `confirmed`);
- the *open sealed* segments: sealed segments whose file handle and indexes
  stay loaded, the most recently used first to go when there are more than
  `open_sealed_max` (an LRU, so memory stays bounded however long the log).

Invariants:
- the chain is never empty, and each segment's base offset is the previous
  one's next offset (offsets stay dense);
- `_bases` lists the segments' base offsets in the same order (for `bisect`);
- every unconfirmed segment is in the chain, sealed, and never evicted from
  the open sealed set (a sync point on the fsync thread may be using it);
- a segment leaving the chain leaves both sets.
"""

from __future__ import annotations

import contextlib
from bisect import bisect_right
from collections import OrderedDict

from segments.filesystem import FileSystem
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


class SegmentChain:
    """See the module docstring."""

    def __init__(self, fs: FileSystem, directory: str, index_interval_bytes: int,
                 open_sealed_max: int, segments: list[Segment]) -> None:
        if not segments:
            raise ValueError("a segment chain holds at least one segment")
        self._fs = fs
        self._directory = directory
        self._interval = index_interval_bytes
        self._open_sealed_max = open_sealed_max
        self._segments = list(segments)
        self._bases = [segment.base_offset for segment in segments]
        self._open_sealed: OrderedDict[int, Segment] = OrderedDict()
        self._unconfirmed: list[Segment] = []

    # ------------------------------------------------------------------ lookups

    @property
    def first(self) -> Segment:
        return self._segments[0]

    @property
    def active(self) -> Segment:
        return self._segments[-1]

    def __len__(self) -> int:
        return len(self._segments)

    def all(self) -> list[Segment]:
        """Every segment, oldest first (a copy)."""
        return list(self._segments)

    def slot_of(self, offset: int) -> int:
        """The slot of the segment holding `offset` (past the end: the active one)."""
        return bisect_right(self._bases, offset) - 1

    def use(self, slot: int) -> Segment:
        """The segment in `slot`, to read: a sealed one counts as recently used."""
        segment = self._segments[slot]
        if slot != len(self._segments) - 1:
            self._remember_sealed(segment)
        return segment

    # ---------------------------------------------------------- growing, syncing

    def start_segment(self, base_offset: int) -> Segment:
        """A new, empty active segment at `base_offset` (the old active one is sealed)."""
        segment = Segment.create(self._fs, self._directory, base_offset, self._interval)
        self._segments.append(segment)
        self._bases.append(base_offset)
        return segment

    def rolled(self, segment: Segment) -> None:
        """`segment` was sealed; it waits for a sync to be confirmed."""
        self._unconfirmed.append(segment)

    def unconfirmed(self) -> list[Segment]:
        """The rolled segments waiting for a sync, oldest first (a copy)."""
        return list(self._unconfirmed)

    def confirmed(self, segments: list[Segment]) -> None:
        """A sync confirmed `segments` (those still in the chain stay loaded for now)."""
        for segment in segments:
            if segment in self._unconfirmed:
                self._unconfirmed.remove(segment)
                self._remember_sealed(segment)

    def _remember_sealed(self, segment: Segment) -> None:
        """Keep a bounded number of sealed segments' handles and indexes loaded.

        A rolled segment not yet confirmed is never evicted: a sync point running on
        the fsync thread may be syncing its handle and writing its indexes.
        """
        self._open_sealed[segment.base_offset] = segment
        self._open_sealed.move_to_end(segment.base_offset)
        while len(self._open_sealed) > self._open_sealed_max:
            base = next((base for base, kept in self._open_sealed.items()
                         if kept not in self._unconfirmed), None)
            if base is None:
                break  # all waiting for their sync: over the bound until it finishes
            evicted = self._open_sealed.pop(base)
            evicted.close()
            evicted.release_indexes()

    def _forget(self, segment: Segment) -> None:
        self._open_sealed.pop(segment.base_offset, None)
        if segment in self._unconfirmed:
            self._unconfirmed.remove(segment)

    # --------------------------------------------------------------- shortening

    def cut_back_to(self, offset: int) -> None:
        """Remove every record at or past `offset`, which is inside the chain.

        Segments starting at or past it are deleted; the one holding it becomes
        active again, and the part of a batch that straddles `offset` is
        re-encoded. Nothing is synced here: the log syncs next.
        """
        reactivated = False
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            self._drop_last()
            reactivated = True
        active = self._segments[-1]
        if reactivated:
            self._forget(active)
            active.remove_index_files()  # they would vouch for it if it is sealed again
            active.reactivate()
        straddling = active.truncate_to(offset)
        if straddling is not None:
            kept = [Record(r.value, r.timestamp_ms, r.key, r.headers)
                    for r in straddling.records() if r.offset < offset]
            compression = Compression(straddling.flags & 0x3)
            active.append_encoded([encode_batch_parts(straddling.base_offset, kept, compression)])

    def restart_at(self, offset: int) -> None:
        """Delete every segment and start an empty one at `offset` (unsynced directory)."""
        while self._segments:
            self._drop_last()
        self.start_segment(offset)

    def _drop_last(self) -> None:
        segment = self._segments.pop()
        self._bases.pop()
        self._forget(segment)
        segment.delete()

    def detach_front(self, offset: int) -> list[Segment]:
        """Take the sealed segments whose records are all below `offset` out of the
        chain, closed, their files left for `delete_detached`; the active one stays."""
        detached: list[Segment] = []
        while len(self._segments) > 1 and self._segments[0].next_offset <= offset:
            segment = self._segments.pop(0)
            self._bases.pop(0)
            self._forget(segment)
            segment.close()
            detached.append(segment)
        return detached

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Close every segment's file handle."""
        for segment in self._segments:
            segment.close()
        self._open_sealed.clear()
