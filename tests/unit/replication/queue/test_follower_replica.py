"""FollowerReplica: a follower's log, cursor and epochs on disk, across crashes."""

from __future__ import annotations

import contextlib
import os
import random

import pytest

from replication.queue.epoch_history import EpochHistory, EpochStart
from replication.queue.follower_replica import CURSOR_SYNC_INTERVAL_MS, FollowerReplica
from replication.queue.replication_leader import Truncate
from segments.cursor_log import CursorLog
from segments.errors import NonSequentialBatchError
from segments.log import Log, LogConfig
from segments.memory_filesystem import MemoryFileSystem
from segments.record_batch import BatchFormatError, Record

from .cluster import all_batches, batch_bytes, values
from .faults import CountingFileSystem, PowerCut

DIR = "/data/q"
SMALL = LogConfig(segment_bytes_max=400, index_interval_bytes=64)


def source_log(batch_sizes: list[int], start: int = 0) -> Log:
    """A leader's log elsewhere: one batch per size, record values naming their offset."""
    log = Log.open(MemoryFileSystem(), "/leader/log", SMALL, initial_offset=start)
    for size in batch_sizes:
        base = log.next_offset
        log.append([Record(b"v%d" % (base + i), 1000 + base + i) for i in range(size)])
    log.sync()
    return log


def raw(log: Log, start: int | None = None, end: int | None = None) -> list[bytes]:
    """The leader's raw batches from `start` up to `end` (batch boundaries)."""
    stop = log.next_offset if end is None else end
    return [b.data for b in all_batches(log, start) if b.next_offset <= stop]


E1 = (EpochStart(1, 0),)


@pytest.fixture
def fs() -> MemoryFileSystem:
    return MemoryFileSystem()


def test_a_new_follower_is_empty(fs: MemoryFileSystem) -> None:
    replica = FollowerReplica.open(fs, DIR)
    assert (replica.next_offset, replica.log_start, replica.last_epoch) == (0, 0, 0)
    assert replica.acked_version == -1
    assert replica.high_watermark is None  # not heard from a leader yet
    assert not replica.cursor.acked
    assert fs.listdir(DIR) == ["cursor", "log"]


def test_appended_batches_are_the_leaders_bytes_at_the_same_offsets(fs: MemoryFileSystem) -> None:
    leader = source_log([3, 1, 5, 2])
    replica = FollowerReplica.open(fs, DIR)
    replica.append(raw(leader), E1)
    replica.sync()
    assert replica.next_offset == 11
    assert batch_bytes(replica.log) == batch_bytes(leader)
    assert values(replica.log) == {i: b"v%d" % i for i in range(11)}
    assert replica.history.entries == E1
    assert EpochHistory.load(fs, DIR).entries == E1


def test_batches_must_follow_on(fs: MemoryFileSystem) -> None:
    leader = source_log([3, 2])
    replica = FollowerReplica.open(fs, DIR)
    with pytest.raises(NonSequentialBatchError):
        replica.append(raw(leader)[1:], E1)
    damaged = bytearray(raw(leader)[0])
    damaged[-1] ^= 0xFF
    with pytest.raises(BatchFormatError):
        replica.append([bytes(damaged)], E1)
    assert replica.next_offset == 0


def test_only_epochs_that_cover_appended_records_are_adopted(fs: MemoryFileSystem) -> None:
    leader = source_log([4, 4, 4])
    replica = FollowerReplica.open(fs, DIR)
    history = (EpochStart(1, 0), EpochStart(2, 4), EpochStart(4, 12))
    replica.append(raw(leader, end=4), history)
    assert list(replica.history.entries) == [EpochStart(1, 0)]  # 2 starts at its end
    replica.append(raw(leader, 4, 12), history)
    assert list(replica.history.entries) == list(history[:2])  # 4 has no records here yet
    assert replica.last_epoch == 2
    # Entries it already has, or older ones, change nothing.
    replica.append([], (EpochStart(1, 0), EpochStart(2, 4)))
    assert list(replica.history.entries) == list(history[:2])


def test_unsynced_records_are_lost_in_a_crash_and_so_are_their_epochs(
        fs: MemoryFileSystem) -> None:
    leader = source_log([5, 5, 5])
    replica = FollowerReplica.open(fs, DIR)
    replica.append(raw(leader, end=5), E1)
    replica.sync()
    replica.append(raw(leader, 5), (*E1, EpochStart(2, 5), EpochStart(3, 10)))
    assert replica.last_epoch == 3
    fs.crash_losing_all_unsynced()
    reopened = FollowerReplica.open(fs, DIR)
    assert reopened.next_offset == 5
    # Epoch 2 began at the end (no records yet), epoch 3 after it: only 3 is forgotten.
    assert reopened.history.entries == (EpochStart(1, 0), EpochStart(2, 5))


def test_a_synced_follower_loses_nothing_in_a_crash(fs: MemoryFileSystem) -> None:
    leader = source_log([5, 5, 5])
    replica = FollowerReplica.open(fs, DIR)
    replica.append(raw(leader), (*E1, EpochStart(2, 5)))
    replica.sync()
    replica.apply_acks([(0, 7)], 3)
    for seed in range(5):
        fs.crash(random.Random(seed))
        reopened = FollowerReplica.open(fs, DIR)
        assert batch_bytes(reopened.log) == batch_bytes(leader)
        assert reopened.history.entries == (*E1, EpochStart(2, 5))
        assert reopened.cursor.acked.ranges() == [(0, 7)]
        assert reopened.acked_version == -1  # unknown until the leader's set comes again


def test_reopen_forgets_acks_past_a_lost_end(fs: MemoryFileSystem) -> None:
    leader = source_log([5, 5])
    replica = FollowerReplica.open(fs, DIR)
    replica.append(raw(leader, end=5), E1)
    replica.sync()
    replica.append(raw(leader, 5), E1)
    replica.apply_acks([(0, 8)], 1)  # applied before the records were synced
    fs.crash_losing_all_unsynced()
    reopened = FollowerReplica.open(fs, DIR)
    assert reopened.next_offset == 5
    assert reopened.cursor.acked.ranges() == [(0, 5)]


def test_truncate_cuts_log_cursor_and_epochs(fs: MemoryFileSystem) -> None:
    leader = source_log([4, 4, 4, 4])
    replica = FollowerReplica.open(fs, DIR)
    replica.append(raw(leader), (*E1, EpochStart(2, 8), EpochStart(3, 12)))
    replica.sync()
    replica.apply_acks([(0, 2), (6, 14)], 5)
    assert replica.acked_version == 5
    # The leader says epoch 2 (shared) ends at 10 there: this log's epoch 2 ends at 12.
    assert replica.truncate(Truncate(10, 2)) == 10
    assert replica.next_offset == 10
    assert replica.history.entries == (*E1, EpochStart(2, 8))
    assert replica.cursor.acked.ranges() == [(0, 2), (6, 10)]
    assert replica.acked_version == -1
    assert values(replica.log) == {i: b"v%d" % i for i in range(10)}  # mid-batch cut
    fs.crash_losing_all_unsynced()
    reopened = FollowerReplica.open(fs, DIR)
    assert reopened.next_offset == 10
    assert reopened.history.entries == (*E1, EpochStart(2, 8))
    assert reopened.cursor.acked.ranges() == [(0, 2), (6, 10)]


def test_truncate_at_its_own_epoch_end_when_sooner(fs: MemoryFileSystem) -> None:
    leader = source_log([4, 4, 4])
    replica = FollowerReplica.open(fs, DIR)
    replica.append(raw(leader), (*E1, EpochStart(3, 4)))
    replica.sync()
    assert replica.truncate(Truncate(9, 1)) == 4
    assert replica.history.entries == E1
    assert replica.truncate(Truncate(9, 1)) == 4  # again: nothing more to cut


def test_truncate_below_its_own_log_start_starts_over_empty_at_the_cut(
        fs: MemoryFileSystem) -> None:
    leader = source_log([3, 3], start=50)
    replica = FollowerReplica.open(fs, DIR)
    replica.reset(50)
    replica.append(raw(leader), (EpochStart(2, 40),))
    replica.sync()
    assert (replica.log_start, replica.next_offset) == (50, 56)
    # Another leader's epoch 1, the last one it shares, ended at 30: nothing here matches.
    assert replica.truncate(Truncate(30, 1)) == 30
    assert (replica.log_start, replica.next_offset, replica.last_epoch) == (30, 30, 0)
    assert replica.cursor.acked.ranges() == [(0, 30)]


def test_reset_starts_an_empty_log_with_everything_below_acked(fs: MemoryFileSystem) -> None:
    leader = source_log([4, 4])
    replica = FollowerReplica.open(fs, DIR)
    replica.append(raw(leader), E1)
    replica.sync()
    replica.apply_acks([(1, 3)], 2)
    replica.reset(100)
    assert (replica.log_start, replica.next_offset, replica.last_epoch) == (100, 100, 0)
    assert replica.cursor.acked.ranges() == [(0, 100)]
    assert replica.acked_version == -1
    fs.crash_losing_all_unsynced()
    reopened = FollowerReplica.open(fs, DIR)
    assert (reopened.log_start, reopened.next_offset, reopened.last_epoch) == (100, 100, 0)
    assert reopened.cursor.acked.ranges() == [(0, 100)]
    reopened.reset(0)
    assert not reopened.cursor.acked


def test_apply_acks_keeps_only_what_is_below_its_end(fs: MemoryFileSystem) -> None:
    leader = source_log([5, 5])
    replica = FollowerReplica.open(fs, DIR)
    replica.append(raw(leader, end=5), E1)
    replica.sync()
    replica.apply_acks([(0, 2), (3, 8)], 4)
    assert replica.cursor.acked.ranges() == [(0, 2), (3, 5)]
    assert replica.acked_version == -1  # the set was clipped: not all of version 4
    replica.append(raw(leader, 5), E1)
    replica.sync()
    replica.apply_acks([(0, 2), (3, 8)], 4)
    assert replica.cursor.acked.ranges() == [(0, 2), (3, 8)]
    assert replica.acked_version == 4


def test_apply_acks_writes_only_what_is_missing(fs: MemoryFileSystem) -> None:
    leader = source_log([50])
    replica = FollowerReplica.open(fs, DIR)
    replica.append(raw(leader), E1)
    replica.sync()
    acked: list[tuple[int, int]] = []
    for version, offset in enumerate(range(0, 50, 2)):
        acked = [(0, offset + 1)] if offset == 0 else [(0, 1), (2, offset + 1)]
        replica.apply_acks(acked, version)
    entries = replica.cursor.entry_count
    replica.apply_acks(acked, 99)
    assert replica.cursor.entry_count == entries  # nothing new, nothing written
    assert replica.acked_version == 99
    assert replica.cursor.acked.ranges() == [(0, 1), (2, 49)]


def test_follow_log_start_deletes_whole_segments_below_the_leaders_start(
        fs: MemoryFileSystem) -> None:
    leader = source_log([6] * 10)
    fs.makedirs(DIR)
    log = Log.open(fs, os.path.join(DIR, "log"), SMALL)
    cursor = CursorLog.open(fs, os.path.join(DIR, "cursor"))
    replica = FollowerReplica(fs, DIR, log, cursor, EpochHistory(E1))
    replica.append(raw(leader), E1)
    replica.sync()
    bases = [base for base, *_ in replica.log.segment_summaries()]
    assert len(bases) > 2
    replica.follow_log_start(0)
    assert replica.log_start == 0
    replica.follow_log_start(bases[2] + 1)
    assert replica.log_start == bases[2]  # the segment holding the start stays
    replica.follow_log_start(bases[1])  # never backwards
    assert replica.log_start == bases[2]
    replica.follow_log_start(10_000)  # beyond its end: it keeps its end
    assert replica.log_start == replica.next_offset == 60


def test_close_is_idempotent(fs: MemoryFileSystem) -> None:
    replica = FollowerReplica.open(fs, DIR)
    replica.close()
    replica.close()
    assert replica.closed
    assert replica.log.closed
    FollowerReplica.open(fs, DIR).close()  # the directory lock was released


def test_a_power_cut_anywhere_in_append_never_leaves_records_without_their_epoch() -> None:
    """A record that survives a crash must carry the epoch it was written in: a promoted
    replica that labelled another leader's records with an older epoch would pass them off
    as that older leader's records and its followers would keep theirs (see the protocol
    test `test_records_without_their_epoch_must_not_survive_a_crash`)."""
    leader = source_log([4, 3, 5, 2])
    history = (EpochStart(1, 0), EpochStart(2, 4), EpochStart(3, 7))
    entries_at = EpochHistory(history)

    def prepared() -> MemoryFileSystem:
        fs = MemoryFileSystem()
        replica = FollowerReplica.open(fs, DIR)
        replica.append(raw(leader, end=4), history)
        replica.sync()
        replica.close()
        return fs

    counting = CountingFileSystem(prepared(), budget=-1)
    FollowerReplica.open(counting, DIR).append(raw(leader, 4), history)
    opened_steps = CountingFileSystem(prepared(), budget=-1)
    FollowerReplica.open(opened_steps, DIR)
    total = counting.steps - opened_steps.steps
    assert total > 4
    survivors: set[int] = set()
    for step in range(total + 1):
        for seed in range(6):
            fs = prepared()
            cutting = CountingFileSystem(fs, budget=opened_steps.steps + step)
            replica = FollowerReplica.open(cutting, DIR)
            with contextlib.suppress(PowerCut):
                replica.append(raw(leader, 4), history)
            fs.crash(random.Random(seed))
            reopened = FollowerReplica.open(fs, DIR)
            survivors.add(reopened.next_offset)
            for offset in range(reopened.next_offset):
                assert reopened.history.epoch_at(offset) == entries_at.epoch_at(offset), (
                    step, seed, offset, reopened.history.entries)
            reopened.close()
    assert max(survivors) > 4  # some crashes did keep unsynced records


def test_acks_taken_in_the_fetch_loop_are_synced_within_the_interval(
        fs: MemoryFileSystem) -> None:
    leader = source_log([5, 5])
    replica = FollowerReplica.open(fs, DIR)
    replica.append(raw(leader), E1)
    replica.sync()
    replica.take_acks([(0, 3)], 1, now_ms=1000)
    assert replica.cursor.acked.ranges() == [(0, 3)] and replica.acked_version == 1
    replica.plan_sync(now_ms=1000 + CURSOR_SYNC_INTERVAL_MS - 1)
    replica.sync()  # the log's sync: the cursor's oldest ack is not yet due
    fs.crash_losing_all_unsynced()
    replica = FollowerReplica.open(fs, DIR)
    assert replica.cursor.acked.ranges() == []  # a redelivery, no more
    replica.take_acks([(0, 3)], 1, now_ms=2000)
    replica.take_acks([(0, 6)], 2, now_ms=2100)
    replica.plan_sync(now_ms=2000 + CURSOR_SYNC_INTERVAL_MS)
    replica.sync()  # due: the fsync thread syncs the cursor after the log
    fs.crash_losing_all_unsynced()
    assert FollowerReplica.open(fs, DIR).cursor.acked.ranges() == [(0, 6)]


def test_acks_alone_are_synced_on_the_loop_after_twice_the_interval(
        fs: MemoryFileSystem) -> None:
    leader = source_log([5])
    replica = FollowerReplica.open(fs, DIR)
    replica.append(raw(leader), E1)
    replica.sync()
    replica.take_acks([(0, 1)], 1, now_ms=0)
    replica.take_acks([(0, 2)], 2, now_ms=2 * CURSOR_SYNC_INTERVAL_MS - 1)
    fs.crash_losing_all_unsynced()
    replica = FollowerReplica.open(fs, DIR)
    assert replica.cursor.acked.ranges() == []
    replica.take_acks([(0, 1)], 1, now_ms=0)
    replica.take_acks([(0, 2)], 2, now_ms=2 * CURSOR_SYNC_INTERVAL_MS)
    fs.crash_losing_all_unsynced()
    assert FollowerReplica.open(fs, DIR).cursor.acked.ranges() == [(0, 2)]


def test_close_syncs_the_acks_taken(fs: MemoryFileSystem) -> None:
    leader = source_log([5])
    replica = FollowerReplica.open(fs, DIR)
    replica.append(raw(leader), E1)
    replica.sync()
    replica.take_acks([(1, 4)], 1, now_ms=0)
    replica.close()
    fs.crash_losing_all_unsynced()
    assert FollowerReplica.open(fs, DIR).cursor.acked.ranges() == [(1, 4)]
