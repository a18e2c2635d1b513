import pytest

from segments.offset_index import OffsetIndex
from segments.time_index import TimeIndex


def test_offset_index_lookup_finds_last_entry_at_or_before() -> None:
    index = OffsetIndex()
    for relative, position in [(0, 0), (10, 4096), (25, 8200)]:
        index.append(relative, position)
    assert index.lookup(0) == (0, 0)
    assert index.lookup(9) == (0, 0)
    assert index.lookup(10) == (10, 4096)
    assert index.lookup(1000) == (25, 8200)


def test_offset_index_round_trips_and_checks_structure() -> None:
    index = OffsetIndex()
    index.append(0, 0)
    index.append(3, 100)
    copy = OffsetIndex.from_bytes(index.to_bytes())
    assert list(copy.relative_offsets) == [0, 3]
    assert list(copy.positions) == [0, 100]
    assert copy.is_consistent(segment_bytes=200)
    assert not copy.is_consistent(segment_bytes=100)  # entry points past the data
    with pytest.raises(ValueError):
        OffsetIndex.from_bytes(b"\x00" * 7)
    with pytest.raises(ValueError):
        index.append(2, 300)


def test_time_index_scan_start_skips_only_records_known_to_be_older() -> None:
    index = TimeIndex()
    index.append(100, 10)  # records [0, 10) are at most 100
    index.append(250, 20)  # records [0, 20) are at most 250
    index.append(300, 30)  # sentinel for a 30-record segment
    assert index.scan_start(50) == 0
    assert index.scan_start(101) == 10
    assert index.scan_start(250) == 10
    assert index.scan_start(251) == 20
    assert index.max_timestamp_ms() == 300
    assert index.is_consistent(record_count=30)
    assert not index.is_consistent(record_count=31)
    copy = TimeIndex.from_bytes(index.to_bytes())
    assert list(copy.timestamps_ms) == [100, 250, 300]


def test_time_index_keeps_bounds_monotonic_for_out_of_order_timestamps() -> None:
    index = TimeIndex()
    index.append(500, 4)
    index.append(200, 8)  # a lower max cannot lower the bound already known
    assert list(index.timestamps_ms) == [500, 500]
