"""FsyncStats: fixed buckets, cumulative snapshots, a consistent count under concurrent writers."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence

import pytest

from logbroker.queue.fsync_policy import FsyncPolicy
from logbroker.queue.fsync_stats import FSYNC_BUCKETS_S, FSYNC_STATS, FsyncStats
from logbroker.queue.group_commit import GroupCommitter


def test_empty_snapshot_has_every_bucket_at_zero() -> None:
    snapshot = FsyncStats().snapshot()
    assert [bound for bound, _ in snapshot.buckets] == [*FSYNC_BUCKETS_S, math.inf]
    assert all(count == 0 for _, count in snapshot.buckets)
    assert (snapshot.sum_s, snapshot.count) == (0.0, 0)


def test_buckets_are_cumulative_and_a_bound_includes_itself() -> None:
    stats = FsyncStats((0.001, 0.01, 0.1))
    for seconds in (0.0005, 0.001, 0.002, 0.05, 0.1, 3.0):
        stats.record(seconds)
    snapshot = stats.snapshot()
    assert snapshot.buckets == ((0.001, 2), (0.01, 3), (0.1, 5), (math.inf, 6))
    assert snapshot.count == 6
    assert snapshot.sum_s == pytest.approx(3.1535)


def test_a_negative_duration_counts_as_zero() -> None:
    stats = FsyncStats((0.001,))
    stats.record(-0.5)
    snapshot = stats.snapshot()
    assert snapshot.buckets[0] == (0.001, 1)
    assert snapshot.sum_s == 0.0


def test_reset_forgets_everything() -> None:
    stats = FsyncStats((0.001,))
    stats.record(0.5)
    stats.reset()
    assert stats.snapshot().count == 0
    assert stats.snapshot().sum_s == 0.0


@pytest.mark.parametrize("bounds", [(), (0.1, 0.01), (0.0, 1.0), (0.1, 0.1), (1.0, math.inf)])
def test_bad_bounds_are_refused(bounds: Sequence[float]) -> None:
    with pytest.raises(ValueError, match="bucket bounds"):
        FsyncStats(bounds)


def test_concurrent_writers_lose_no_count_and_snapshots_stay_consistent() -> None:
    stats = FsyncStats()
    writers, per_writer = 4, 5_000
    done = threading.Event()
    inconsistent: list[str] = []

    def write(seconds: float) -> None:
        for _ in range(per_writer):
            stats.record(seconds)

    def read() -> None:
        while not done.is_set():
            snapshot = stats.snapshot()
            if snapshot.buckets[-1][1] != snapshot.count:
                inconsistent.append(repr(snapshot))

    reader = threading.Thread(target=read)
    reader.start()
    threads = [threading.Thread(target=write, args=(0.001 * (i + 1),)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    done.set()
    reader.join(timeout=30)
    snapshot = stats.snapshot()
    assert snapshot.count == writers * per_writer
    assert snapshot.sum_s == pytest.approx(per_writer * 0.001 * (1 + 2 + 3 + 4))
    assert not inconsistent


class SlowSyncTarget:
    def __init__(self, sync_s: float) -> None:
        self.sync_s = sync_s

    def append_group(self, items: Sequence[int]) -> list[int]:
        return list(items)

    def sync(self) -> None:
        time.sleep(self.sync_s)

    def wants_sync(self) -> bool:
        return False

    def sync_point(self) -> None:
        return None


async def test_group_committer_records_each_fsync() -> None:
    stats = FsyncStats((0.001, 1.0))
    committer: GroupCommitter[int, int] = GroupCommitter(
        SlowSyncTarget(0.005), FsyncPolicy.parse("always"), fsync_stats=stats)
    assert await committer.submit(1) == 1
    await committer.sync()
    snapshot = stats.snapshot()
    assert snapshot.count == committer.fsyncs == 2
    assert snapshot.buckets[0] == (0.001, 0)  # each sync slept 5 ms
    assert snapshot.buckets[1] == (1.0, 2)
    assert 0.01 <= snapshot.sum_s < 2.0
    await committer.close()


async def test_committers_record_into_the_process_wide_stats_by_default() -> None:
    committer: GroupCommitter[int, int] = GroupCommitter(SlowSyncTarget(0.0),
                                                         FsyncPolicy.parse("always"))
    before = FSYNC_STATS.snapshot().count
    await committer.sync()
    assert FSYNC_STATS.snapshot().count == before + 1
    await committer.close()
