"""The sparse offset index of one segment: relative offset -> byte position.

An entry is added for the first batch of a segment and then for the first
batch after every `index_interval_bytes` of data, so a lookup lands at most
one interval before the wanted batch and the reader scans forward from
there. The index is derived data: it is never checksummed, it is rebuilt
from the segment whenever it is missing or fails `is_consistent`, and a
lookup that lands on the wrong batch is caught by the reader (the batch
header names its own offset).

Entries are two parallel `array('I')`s, 8 bytes per entry in RAM and on disk,
so a 1 GiB segment at the default 4 KiB interval costs 2 MiB.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_right

ENTRY = struct.Struct("<II")


class OffsetIndex:
    def __init__(self) -> None:
        self.relative_offsets = array("I")
        self.positions = array("I")

    def __len__(self) -> int:
        return len(self.relative_offsets)

    def append(self, relative_offset: int, position: int) -> None:
        if self.relative_offsets and (
            relative_offset <= self.relative_offsets[-1] or position <= self.positions[-1]
        ):
            raise ValueError("index entries must grow strictly")
        self.relative_offsets.append(relative_offset)
        self.positions.append(position)

    def lookup(self, relative_offset: int) -> tuple[int, int]:
        """(relative offset, position) of the last entry at or before `relative_offset`.

        (0, 0) when there is none: the segment's first batch is always there.
        """
        slot = bisect_right(self.relative_offsets, relative_offset) - 1
        if slot < 0:
            return 0, 0
        return self.relative_offsets[slot], self.positions[slot]

    def to_bytes(self) -> bytes:
        interleaved = array("I", bytes(8 * len(self)))
        interleaved[0::2] = self.relative_offsets
        interleaved[1::2] = self.positions
        if sys.byteorder != "little":
            interleaved.byteswap()
        return interleaved.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> OffsetIndex:
        """Parse an index file; raises ValueError if its size is not whole entries."""
        if len(data) % ENTRY.size:
            raise ValueError(f"index of {len(data)} bytes is not whole entries")
        interleaved = array("I")
        interleaved.frombytes(data)
        if sys.byteorder != "little":
            interleaved.byteswap()
        index = cls()
        index.relative_offsets = interleaved[0::2]
        index.positions = interleaved[1::2]
        return index

    def is_consistent(self, segment_bytes: int) -> bool:
        """Cheap structural check: starts at (0, 0), grows strictly, stays inside the file."""
        count = len(self)
        if count == 0:
            return segment_bytes == 0
        if self.relative_offsets[0] != 0 or self.positions[0] != 0:
            return False
        if self.positions[-1] >= segment_bytes:
            return False
        offsets, positions = self.relative_offsets, self.positions
        return all(
            offsets[i] < offsets[i + 1] and positions[i] < positions[i + 1]
            for i in range(count - 1)
        )
