"""The time index of one segment, for "replay from a time".

An entry `(max_timestamp_before_ms, relative_offset)` says: every record of
the segment before `relative_offset` has a timestamp at most
`max_timestamp_before_ms`. Entries are added alongside offset index entries,
and a closed segment ends with a sentinel entry for its record count whose
timestamp is the segment's largest. To find the first record at or after a
time `t`, start scanning at the last entry whose timestamp is below `t`:
nothing before it can qualify. Record timestamps need not be monotonic.

Like the offset index it is derived data and rebuilt when missing or
inconsistent; a missing sentinel marks a file cut short.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left

ENTRY = struct.Struct("<qI")


class TimeIndex:
    def __init__(self) -> None:
        self.timestamps_ms = array("q")
        self.relative_offsets = array("I")

    def __len__(self) -> int:
        return len(self.timestamps_ms)

    def append(self, max_timestamp_before_ms: int, relative_offset: int) -> None:
        """Add an entry unless it says nothing new (same or lower bound, same offset)."""
        if self.timestamps_ms:
            if relative_offset < self.relative_offsets[-1]:
                raise ValueError("time index offsets must not go back")
            max_timestamp_before_ms = max(max_timestamp_before_ms, self.timestamps_ms[-1])
            if relative_offset == self.relative_offsets[-1]:
                self.timestamps_ms[-1] = max_timestamp_before_ms
                return
        self.timestamps_ms.append(max_timestamp_before_ms)
        self.relative_offsets.append(relative_offset)

    def scan_start(self, timestamp_ms: int) -> int:
        """Relative offset from which to scan for the first record at or after `timestamp_ms`."""
        slot = bisect_left(self.timestamps_ms, timestamp_ms) - 1
        if slot < 0:
            return 0
        return self.relative_offsets[slot]

    def max_timestamp_ms(self) -> int | None:
        return self.timestamps_ms[-1] if self.timestamps_ms else None

    def to_bytes(self) -> bytes:
        return b"".join(
            ENTRY.pack(ts, rel)
            for ts, rel in zip(self.timestamps_ms, self.relative_offsets, strict=True)
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> TimeIndex:
        if len(data) % ENTRY.size:
            raise ValueError(f"time index of {len(data)} bytes is not whole entries")
        index = cls()
        for ts, rel in ENTRY.iter_unpack(data):
            index.timestamps_ms.append(ts)
            index.relative_offsets.append(rel)
        return index

    def is_consistent(self, record_count: int) -> bool:
        """Monotonic, and ends with the sentinel for `record_count` records."""
        if not self:
            return record_count == 0
        if self.relative_offsets[-1] != record_count:
            return False
        return all(
            self.timestamps_ms[i] <= self.timestamps_ms[i + 1]
            and self.relative_offsets[i] <= self.relative_offsets[i + 1]
            for i in range(len(self) - 1)
        )
