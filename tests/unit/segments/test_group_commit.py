import asyncio
import errno
import time
from collections.abc import Sequence

import pytest

from segments.errors import DiskFullError, LogClosedError
from segments.group_commit import FsyncMode, FsyncPolicy, GroupCommitter
from segments.log import AppendResult, Log
from segments.memory_filesystem import MemoryFileSystem
from segments.record_batch import Record


class CountingTarget:
    """Records every group and sync, and how many appends were outstanding at each sync."""

    def __init__(self) -> None:
        self.groups: list[list[int]] = []
        self.syncs = 0
        self.written: list[int] = []
        self.durable: list[int] = []
        self.fail_next_append: OSError | None = None

    def append_group(self, items: Sequence[int]) -> list[int]:
        if self.fail_next_append is not None:
            error, self.fail_next_append = self.fail_next_append, None
            raise error
        self.groups.append(list(items))
        self.written.extend(items)
        return [item * 10 for item in items]

    def sync(self) -> None:
        self.syncs += 1
        self.durable = list(self.written)

    def wants_sync(self) -> bool:
        return False


def test_policy_parsing() -> None:
    assert FsyncPolicy.parse("always").mode is FsyncMode.ALWAYS
    assert FsyncPolicy.parse("never").mode is FsyncMode.NEVER
    assert FsyncPolicy.parse("interval:250") == FsyncPolicy(FsyncMode.INTERVAL, 250)
    assert str(FsyncPolicy.parse("interval:250")) == "interval:250"
    for bad in ("sometimes", "interval:", "interval:0", "interval:x", "always:3"):
        with pytest.raises(ValueError, match="fsync policy"):
            FsyncPolicy.parse(bad)


async def test_concurrent_submitters_share_writes_and_fsyncs() -> None:
    target = CountingTarget()
    committer: GroupCommitter[int, int] = GroupCommitter(target, FsyncPolicy.parse("always"))

    async def submitter(first: int) -> list[int]:
        results = []
        for i in range(first, first + 20):
            result = await committer.submit(i)
            assert i in target.durable  # resolved only once fsynced
            results.append(result)
        return results

    results = await asyncio.gather(*(submitter(k * 1000) for k in range(64)))
    assert results[3] == [(3000 + i) * 10 for i in range(20)]
    assert sum(len(g) for g in target.groups) == 64 * 20
    assert target.syncs <= 40  # 1280 appends, a few dozen groups at most
    assert max(len(g) for g in target.groups) >= 32


async def test_never_policy_resolves_without_fsync() -> None:
    target = CountingTarget()
    committer: GroupCommitter[int, int] = GroupCommitter(target, FsyncPolicy.parse("never"))
    assert await committer.submit(1) == 10
    assert target.syncs == 0
    await committer.close()
    assert target.syncs == 1  # close makes everything durable


async def test_interval_policy_fsyncs_soon_after_a_write() -> None:
    target = CountingTarget()
    committer: GroupCommitter[int, int] = GroupCommitter(target, FsyncPolicy.parse("interval:20"))
    await committer.submit(1)
    await committer.submit(2)
    assert target.syncs == 0
    await asyncio.sleep(0.1)
    assert target.syncs == 1
    assert target.durable == [1, 2]
    await committer.close()


async def test_a_failed_group_fails_only_its_own_items() -> None:
    target = CountingTarget()
    committer: GroupCommitter[int, int] = GroupCommitter(target, FsyncPolicy.parse("always"))
    target.fail_next_append = OSError(errno.EIO, "boom")
    first = asyncio.ensure_future(committer.submit(1))
    with pytest.raises(OSError, match="boom"):
        await first
    assert await committer.submit(2) == 20


async def test_submissions_are_bounded() -> None:
    target = CountingTarget()
    committer: GroupCommitter[int, int] = GroupCommitter(
        target, FsyncPolicy.parse("always"), group_items_max=4, pending_items_max=8
    )
    results = await asyncio.gather(*(committer.submit(i) for i in range(100)))
    assert results == [i * 10 for i in range(100)]
    assert max(len(g) for g in target.groups) <= 4


async def test_closed_committer_refuses_submissions() -> None:
    committer: GroupCommitter[int, int] = GroupCommitter(CountingTarget(), FsyncPolicy())
    await committer.close()
    with pytest.raises(LogClosedError):
        await committer.submit(1)


async def test_with_a_real_log_disk_full_is_reported_per_group() -> None:
    fs = MemoryFileSystem()
    log = Log.open(fs, "/q")
    committer: GroupCommitter[Sequence[Record], AppendResult] = GroupCommitter(
        log, FsyncPolicy.parse("always")
    )
    assert (await committer.submit([Record(b"a", 1)])).base_offset == 0
    fs.set_capacity(fs.used_bytes + 10)
    with pytest.raises(DiskFullError):
        await committer.submit([Record(b"b" * 100, 2)])
    fs.set_capacity(None)
    assert (await committer.submit([Record(b"c", 3)])).base_offset == 1
    await committer.close()
    fs.crash_losing_all_unsynced()
    reopened = Log.open(fs, "/q")
    assert [r.value for r in reopened.read(0)] == [b"a", b"c"]
    reopened.close()


class SlowSyncTarget(CountingTarget):
    def sync(self) -> None:
        time.sleep(0.05)  # runs on the committer's thread; the loop keeps going
        super().sync()


async def test_non_durable_items_resolve_before_the_fsync() -> None:
    target = SlowSyncTarget()
    committer: GroupCommitter[int, int] = GroupCommitter(target, FsyncPolicy.parse("always"))
    order: list[str] = []

    async def submit(item: int, durable: bool) -> None:
        await committer.submit(item, durable=durable)
        order.append(f"{item}:{'synced' if item in target.durable else 'written'}")

    await asyncio.gather(submit(1, False), submit(2, True))
    assert order == ["1:written", "2:synced"]


async def test_submit_nowait_queues_in_call_order() -> None:
    target = CountingTarget()
    committer: GroupCommitter[int, int] = GroupCommitter(target, FsyncPolicy.parse("always"))
    futures = [committer.submit_nowait(i) for i in range(5)]
    assert await asyncio.gather(*futures) == [0, 10, 20, 30, 40]
    assert target.written == [0, 1, 2, 3, 4]


async def test_on_written_runs_in_order_before_the_fsync() -> None:
    target = SlowSyncTarget()
    committer: GroupCommitter[int, int] = GroupCommitter(target, FsyncPolicy.parse("always"))
    seen: list[tuple[int, bool]] = []
    futures = [
        committer.submit_nowait(i, on_written=lambda r: seen.append((r, r // 10 in target.durable)))
        for i in range(3)
    ]
    assert await asyncio.gather(*futures) == [0, 10, 20]
    assert seen == [(0, False), (10, False), (20, False)]  # written, not yet fsynced


async def test_never_policy_still_confirms_rolled_segments_in_the_background() -> None:
    from segments.log import LogConfig

    fs = MemoryFileSystem()
    log = Log.open(fs, "/q", LogConfig(segment_bytes_max=1024))
    committer: GroupCommitter[Sequence[Record], AppendResult] = GroupCommitter(
        log, FsyncPolicy.parse("never"))
    for i in range(20):
        await committer.submit([Record(b"x" * 200, i)])
    assert log.segment_count > 2
    for _ in range(50):
        await asyncio.sleep(0.01)
        if not log.has_unconfirmed_seals:
            break
    assert not log.has_unconfirmed_seals  # a roll asked for a sync, off the write path
    await committer.close()
    log.close()
