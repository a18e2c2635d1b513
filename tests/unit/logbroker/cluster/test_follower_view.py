"""`FollowerView`: a follower's copy read up to the high watermark it heard, never past it."""

from __future__ import annotations

from logbroker.cluster.follower_view import FollowerView
from logbroker.queue.replay_view import ReplayView
from replication.queue.epoch_history import EpochStart
from replication.queue.follower_replica import FollowerReplica
from segments.log import Log
from segments.memory_filesystem import MemoryFileSystem
from segments.record_batch import Record


def _copy(batches: int, per_batch: int) -> FollowerReplica:
    """A follower holding `batches` batches of the leader's log, appended as they are."""
    fs = MemoryFileSystem()
    leader = Log.open(fs, "/leader/log")
    for b in range(batches):
        leader.append([Record(f"m{b * per_batch + i}".encode(), 1000 + b)
                       for i in range(per_batch)])
    replica = FollowerReplica.open(fs, "/follower")
    replica.append([batch.data for batch in leader.read_batches(0, 1 << 20)],
                   [EpochStart(1, 0)])
    replica.sync()
    return replica


def test_reads_stop_at_the_high_watermark() -> None:
    replica = _copy(batches=3, per_batch=4)
    view: ReplayView = FollowerView(replica, high_watermark=8)
    assert (view.log_start_offset, view.readable_end) == (0, 8)
    assert [r.offset for r in view.read_log(0, 1 << 20)] == list(range(8))
    assert view.read_log(8, 1 << 20) == []
    assert [r.value for r in view.read_log(6, 1 << 20)] == [b"m6", b"m7"]
    assert view.offset_for_timestamp(1001) == 4


def test_the_end_is_the_copy_when_the_watermark_is_ahead_of_it() -> None:
    replica = _copy(batches=2, per_batch=4)
    view = FollowerView(replica, high_watermark=100)
    assert view.readable_end == 8
    assert [r.offset for r in view.read_log(0, 1 << 20)] == list(range(8))
    assert [b.next_offset for b in view.read_batches(0, 1 << 20)] == [4, 8]


def test_a_watermark_of_zero_shows_nothing() -> None:
    view = FollowerView(_copy(batches=1, per_batch=2), high_watermark=0)
    assert view.readable_end == 0
    assert view.read_log(0, 1 << 20) == []
