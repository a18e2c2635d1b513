"""A set of non-negative integers stored as sorted, disjoint half-open ranges.

A queue's acked offsets are mostly one long run from 0 with a few holes left
by slow or redelivered messages, so storing runs instead of single offsets
keeps the set (and the cursor log that persists it) proportional to the
number of holes rather than the number of messages.

Representation: two parallel lists `_los` and `_his` where range `i` is
`[_los[i], _his[i])`. Invariants, kept by every mutator:

* `_los[i] < _his[i]` (no empty ranges);
* `_his[i] < _los[i + 1]` (disjoint *and* non-adjacent: touching ranges are
  merged, so `_his[i]` is never in the set);
* both lists are therefore strictly increasing, which is what lets `bisect`
  find the ranges an operation touches in O(log n).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator


def _check_offset(offset: int) -> None:
    if offset < 0:
        raise ValueError(f"offsets are non-negative, got {offset}")


class RangeSet:
    """Sorted, merged half-open ranges `[lo, hi)` of non-negative offsets."""

    __slots__ = ("_count", "_his", "_los")

    def __init__(self, ranges: Iterable[tuple[int, int]] = ()) -> None:
        self._los: list[int] = []
        self._his: list[int] = []
        self._count = 0
        for lo, hi in ranges:
            self.add(lo, hi)

    # -- mutation -----------------------------------------------------------

    def add(self, lo: int, hi: int) -> bool:
        """Add `[lo, hi)`; return True if at least one offset was new."""
        _check_offset(lo)
        _check_offset(hi)
        if lo >= hi:
            return False
        # Ranges [first, end) overlap or touch [lo, hi): a range with hi == lo or
        # lo == hi is adjacent and must be merged to keep the non-adjacency invariant.
        first = bisect_left(self._his, lo)
        end = bisect_right(self._los, hi)
        if first == end:
            self._los.insert(first, lo)
            self._his.insert(first, hi)
            self._count += hi - lo
            return True
        merged_lo = min(lo, self._los[first])
        merged_hi = max(hi, self._his[end - 1])
        removed = sum(self._his[i] - self._los[i] for i in range(first, end))
        added = (merged_hi - merged_lo) - removed
        if added == 0:
            return False
        self._los[first:end] = [merged_lo]
        self._his[first:end] = [merged_hi]
        self._count += added
        return True

    def remove_from(self, offset: int) -> None:
        """Drop every offset `>= offset` (e.g. acks for records a crash took back)."""
        _check_offset(offset)
        keep = bisect_right(self._los, offset - 1) if offset else 0
        removed = sum(self._his[i] - self._los[i] for i in range(keep, len(self._los)))
        del self._los[keep:]
        del self._his[keep:]
        if self._his and self._his[-1] > offset:
            removed += self._his[-1] - offset
            self._his[-1] = offset
        self._count -= removed

    def clear(self) -> None:
        self._los.clear()
        self._his.clear()
        self._count = 0

    # -- queries ------------------------------------------------------------

    def __contains__(self, offset: object) -> bool:
        if not isinstance(offset, int) or offset < 0:
            return False
        index = bisect_right(self._los, offset) - 1
        return index >= 0 and offset < self._his[index]

    def covers(self, lo: int, hi: int) -> bool:
        """True if every offset of `[lo, hi)` is in the set (vacuously for lo >= hi)."""
        if lo >= hi:
            return True
        _check_offset(lo)
        index = bisect_right(self._los, lo) - 1
        return index >= 0 and hi <= self._his[index]

    def ranges(self) -> list[tuple[int, int]]:
        return list(zip(self._los, self._his, strict=True))

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self._los, self._his, strict=True)

    def __len__(self) -> int:
        """The number of ranges, not offsets; see `count`."""
        return len(self._los)

    def count(self) -> int:
        """The number of offsets in the set."""
        return self._count

    @property
    def ack_floor(self) -> int:
        """The lowest offset not in the set: everything below it is acked."""
        if self._los and self._los[0] == 0:
            return self._his[0]
        return 0

    def missing_in(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """The gaps of `[lo, hi)`: the offsets in it not in the set, as ranges."""
        _check_offset(lo)
        if lo >= hi:
            return []
        gaps: list[tuple[int, int]] = []
        cursor = lo
        index = bisect_right(self._his, lo)
        while index < len(self._los) and self._los[index] < hi:
            if self._los[index] > cursor:
                gaps.append((cursor, self._los[index]))
            cursor = max(cursor, self._his[index])
            index += 1
        if cursor < hi:
            gaps.append((cursor, hi))
        return gaps

    # -- value semantics ----------------------------------------------------

    def copy(self) -> RangeSet:
        duplicate = RangeSet()
        duplicate._los = self._los.copy()
        duplicate._his = self._his.copy()
        duplicate._count = self._count
        return duplicate

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RangeSet):
            return NotImplemented
        return self._los == other._los and self._his == other._his

    def __repr__(self) -> str:
        shown = ", ".join(f"[{lo}, {hi})" for lo, hi in self)
        return f"RangeSet({shown})"
