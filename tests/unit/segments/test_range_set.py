from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segments.range_set import RangeSet


def test_empty() -> None:
    ranges = RangeSet()
    assert ranges.ranges() == []
    assert len(ranges) == 0
    assert ranges.count() == 0
    assert ranges.ack_floor == 0
    assert 0 not in ranges
    assert ranges.missing_in(3, 6) == [(3, 6)]


def test_add_reports_whether_anything_was_new() -> None:
    ranges = RangeSet()
    assert ranges.add(2, 5) is True
    assert ranges.add(2, 5) is False
    assert ranges.add(3, 4) is False
    assert ranges.add(4, 6) is True
    assert ranges.ranges() == [(2, 6)]


def test_empty_and_negative_ranges() -> None:
    ranges = RangeSet()
    assert ranges.add(5, 5) is False
    assert ranges.add(6, 2) is False
    assert ranges.ranges() == []
    with pytest.raises(ValueError):
        ranges.add(-1, 3)
    with pytest.raises(ValueError):
        ranges.add(-1, 0)
    assert -1 not in ranges


def test_adjacent_ranges_merge() -> None:
    ranges = RangeSet()
    ranges.add(0, 5)
    ranges.add(5, 9)
    assert ranges.ranges() == [(0, 9)]
    ranges.add(10, 12)
    assert ranges.ranges() == [(0, 9), (10, 12)]
    ranges.add(9, 10)
    assert ranges.ranges() == [(0, 12)]
    assert len(ranges) == 1
    assert ranges.count() == 12


def test_adjacent_on_the_left_merges() -> None:
    ranges = RangeSet([(5, 9)])
    ranges.add(2, 5)
    assert ranges.ranges() == [(2, 9)]


def test_add_spanning_several_ranges() -> None:
    ranges = RangeSet([(0, 2), (4, 6), (8, 10), (12, 14), (20, 22)])
    assert ranges.add(1, 13) is True
    assert ranges.ranges() == [(0, 14), (20, 22)]
    assert ranges.count() == 16


def test_add_fills_gap_exactly() -> None:
    ranges = RangeSet([(0, 3), (5, 8)])
    assert ranges.add(3, 5) is True
    assert ranges.ranges() == [(0, 8)]


def test_add_inside_existing_range_changes_nothing() -> None:
    ranges = RangeSet([(0, 100)])
    assert ranges.add(10, 20) is False
    assert ranges.ranges() == [(0, 100)]


def test_add_between_ranges_keeps_order() -> None:
    ranges = RangeSet([(0, 2), (10, 12)])
    ranges.add(5, 6)
    assert ranges.ranges() == [(0, 2), (5, 6), (10, 12)]


def test_contains() -> None:
    ranges = RangeSet([(2, 4), (6, 7)])
    assert [offset for offset in range(9) if offset in ranges] == [2, 3, 6]
    assert "2" not in ranges


def test_ack_floor() -> None:
    ranges = RangeSet([(1, 5)])
    assert ranges.ack_floor == 0
    ranges.add(0, 1)
    assert ranges.ack_floor == 5
    ranges.add(6, 8)
    assert ranges.ack_floor == 5
    ranges.add(5, 6)
    assert ranges.ack_floor == 8


def test_missing_in() -> None:
    ranges = RangeSet([(2, 4), (6, 8)])
    assert ranges.missing_in(0, 10) == [(0, 2), (4, 6), (8, 10)]
    assert ranges.missing_in(3, 7) == [(4, 6)]
    assert ranges.missing_in(2, 4) == []
    assert ranges.missing_in(4, 6) == [(4, 6)]
    assert ranges.missing_in(5, 5) == []


def test_covers() -> None:
    ranges = RangeSet([(2, 6)])
    assert ranges.covers(2, 6)
    assert ranges.covers(3, 4)
    assert not ranges.covers(1, 3)
    assert not ranges.covers(5, 7)
    assert ranges.covers(9, 9)


def test_clear_copy_eq() -> None:
    ranges = RangeSet([(0, 3)])
    duplicate = ranges.copy()
    assert duplicate == ranges
    duplicate.add(5, 6)
    assert duplicate != ranges
    assert ranges.ranges() == [(0, 3)]
    duplicate.clear()
    assert duplicate == RangeSet()
    assert duplicate.count() == 0
    assert repr(ranges) == "RangeSet([0, 3))"


UNIVERSE = 40

operations = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove_from"]),
        st.integers(0, UNIVERSE),
        st.integers(0, UNIVERSE),
    ),
    max_size=30,
)


def _as_ranges(offsets: set[int]) -> list[tuple[int, int]]:
    result: list[tuple[int, int]] = []
    for offset in sorted(offsets):
        if result and result[-1][1] == offset:
            result[-1] = (result[-1][0], offset + 1)
        else:
            result.append((offset, offset + 1))
    return result


@settings(max_examples=300)
@given(operations)
def test_matches_a_plain_set(ops: list[tuple[str, int, int]]) -> None:
    ranges = RangeSet()
    model: set[int] = set()
    for operation, lo, hi in ops:
        if operation == "add":
            new = set(range(lo, hi)) - model
            assert ranges.add(lo, hi) is bool(new)
            model |= new
        else:
            ranges.remove_from(lo)
            model = {offset for offset in model if offset < lo}

        assert ranges.ranges() == _as_ranges(model)
        assert len(ranges) == len(_as_ranges(model))
        assert ranges.count() == len(model)
        floor = 0
        while floor in model:
            floor += 1
        assert ranges.ack_floor == floor
        for offset in range(UNIVERSE + 2):
            assert (offset in ranges) == (offset in model)
    for lo in range(0, UNIVERSE + 2, 3):
        for hi in range(lo, UNIVERSE + 2, 5):
            gaps = {offset for offset in range(lo, hi) if offset not in model}
            assert ranges.missing_in(lo, hi) == _as_ranges(gaps)
            assert ranges.covers(lo, hi) == (not gaps)


@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60))), st.integers(0, 70))
def test_remove_from_drops_everything_at_or_past_the_offset(
    adds: list[tuple[int, int]], cut: int
) -> None:
    ranges = RangeSet()
    model: set[int] = set()
    for lo, hi in adds:
        ranges.add(lo, hi)
        model.update(range(lo, hi))
    ranges.remove_from(cut)
    expected = {o for o in model if o < cut}
    assert {o for lo, hi in ranges.ranges() for o in range(lo, hi)} == expected
    assert ranges.count() == len(expected)
