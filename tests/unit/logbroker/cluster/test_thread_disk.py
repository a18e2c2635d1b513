"""`ThreadDisk`: a follower replica's syncs, on the native thread when they are only an
fdatasync, on a Python thread otherwise; durable when `done` is called."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from logbroker.cluster.queue_followers import ThreadDisk
from logbroker.queue.native_fsync import available
from replication.queue.epoch_history import EpochStart
from replication.queue.follower_replica import CURSOR_SYNC_INTERVAL_MS, FollowerReplica
from segments.filesystem import RealFileSystem
from segments.log import Log
from segments.memory_filesystem import MemoryFileSystem
from segments.record_batch import Record


def _batches(count: int) -> list[bytes]:
    """A leader's raw batches: one record each, values naming their offset."""
    leader = Log.open(MemoryFileSystem(), "/leader")
    for i in range(count):
        leader.append([Record(b"v%d" % i, 1000 + i)])
    return [batch.data for batch in leader.read_batches(0, 1 << 20)]


async def _sync(disk: ThreadDisk, replica: FollowerReplica) -> Exception | None:
    outcome: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()
    disk.sync(replica, outcome.set_result)
    return await asyncio.wait_for(outcome, 10)


@pytest.mark.parametrize("native", [True, False])
async def test_a_sync_is_durable_when_done_is_called(tmp_path: Path, native: bool) -> None:
    if native and not available():
        pytest.skip("the C extension is not built")
    fs = RealFileSystem()
    disk = ThreadDisk(fs, lambda vhost, name: str(tmp_path / name), native_fsync=native)
    replica = disk.open(("/", "q"))
    batches = _batches(6)
    replica.append(batches[:3], (EpochStart(1, 0),))
    assert await _sync(disk, replica) is None  # the new segment's directory: Python
    replica.append(batches[3:], ())
    assert replica.sync_point() is not None
    assert await _sync(disk, replica) is None  # an fdatasync only: native when asked
    assert (replica in disk._native) is native
    replica.take_acks([(0, 2)], 1, now_ms=0)
    replica.plan_sync(now_ms=CURSOR_SYNC_INTERVAL_MS)
    assert replica.sync_point() is None  # the cursor too: `sync` on a Python thread
    assert await _sync(disk, replica) is None
    await disk.settled(replica)
    assert replica not in disk._native  # its thread stopped
    replica.close()
    reopened = FollowerReplica.open(fs, str(tmp_path / "q"))
    assert reopened.next_offset == 6 and reopened.cursor.acked.ranges() == [(0, 2)]
    reopened.close()
