import pytest

from logbroker.queue.retention import Retention, SegmentSummary, max_age_ms, reclaim_floor

DAY_MS = 86_400_000


def segments(*spec: tuple[int, int, int]) -> list[SegmentSummary]:
    """(next_offset, size, newest timestamp) per segment, bases chained from 0."""
    out, base = [], 0
    for next_offset, size, timestamp in spec:
        out.append(SegmentSummary(base, next_offset, size, timestamp))
        base = next_offset
    return out


def test_nothing_unsettled_and_never_the_active_segment_goes() -> None:
    log = segments((10, 100, 0), (20, 100, 0), (30, 100, 0))
    assert reclaim_floor(log, ack_floor=15, now_ms=10 * DAY_MS, retention=Retention(0, 0)) == 10
    assert reclaim_floor(log, ack_floor=30, now_ms=10 * DAY_MS, retention=Retention(0, 0)) == 20


def test_time_retention_keeps_young_settled_segments() -> None:
    log = segments((10, 100, 1000), (20, 100, 5000), (30, 100, 9000))
    retention = Retention(retention_ms=3000, retention_bytes=None)
    assert reclaim_floor(log, 30, now_ms=4000, retention=retention) == 10
    assert reclaim_floor(log, 30, now_ms=8000, retention=retention) == 20
    assert reclaim_floor(log, 30, now_ms=100, retention=retention) == 0


def test_size_retention_drops_the_oldest_until_under_the_limit() -> None:
    log = segments((10, 100, 0), (20, 100, 0), (30, 100, 0), (40, 100, 0))
    retention = Retention(retention_ms=None, retention_bytes=150)
    assert reclaim_floor(log, 40, now_ms=0, retention=retention) == 20
    assert reclaim_floor(log, 40, 0, Retention(None, None)) == 0


def test_max_age_units() -> None:
    assert max_age_ms("7D") == 7 * DAY_MS
    assert max_age_ms("12h") == 12 * 3_600_000
    assert max_age_ms("30s") == 30_000
    with pytest.raises(ValueError):
        max_age_ms("7x")
