import asyncio
import errno
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from logbroker.queue.fsync_policy import FsyncMode, FsyncPolicy
from logbroker.queue.group_commit import GroupCommitter
from segments.errors import DiskFullError, LogClosedError
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

    def sync_point(self) -> None:
        return None


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


async def test_submitters_an_fsync_released_are_written_together_next() -> None:
    target = CountingTarget()
    committer: GroupCommitter[int, int] = GroupCommitter(target, FsyncPolicy.parse("always"))

    async def submitter(item: int) -> None:
        await committer.submit(item)
        await committer.submit(item + 10)

    await asyncio.gather(*(submitter(item) for item in (1, 2, 3)))
    # The first ever submission is written at once; after the fsync, the flusher
    # waits for the released submitters, so the first of them does not write alone.
    assert target.groups == [[1], [2, 3], [11, 12, 13]]
    assert target.durable == [1, 2, 3, 11, 12, 13]
    await committer.close()


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
        if not log.wants_sync():
            break
    assert not log.wants_sync()  # a roll asked for a sync, off the write path
    await committer.close()
    log.close()


class PipelinedTarget(CountingTarget):
    """A target whose fsync may overlap appends: a sync point covers what was written
    when it was taken; its run blocks until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.points_taken: list[int] = []
        self.fail_sync_covering: list[int] | None = None

    def sync_point(self) -> "PipelinedTarget.Point":  # type: ignore[override]
        self.points_taken.append(len(self.written))
        return PipelinedTarget.Point(self, list(self.written))

    class Point:
        def __init__(self, target: "PipelinedTarget", covered: list[int]) -> None:
            self.target, self.covered = target, covered

        def run(self) -> None:
            assert self.target.release.wait(5)
            if self.covered == self.target.fail_sync_covering:
                raise OSError(errno.EIO, "fsync failed")

        def fds(self) -> None:
            return None  # no real files: `run` is called

        def finish(self) -> None:
            self.target.syncs += 1
            self.target.durable = self.target.durable + [
                item for item in self.covered if item not in self.target.durable]


async def test_submissions_during_an_fsync_are_written_at_once_and_wait_for_the_next() -> None:
    target = PipelinedTarget()
    committer: GroupCommitter[int, int] = GroupCommitter(target, FsyncPolicy.parse("always"))
    written: list[int] = []
    first = committer.submit_nowait(1, on_written=written.append)
    for _ in range(20):
        await asyncio.sleep(0)
    assert written == [10] and target.points_taken == [1]  # the first fsync is running
    second = committer.submit_nowait(2, on_written=written.append)
    assert written == [10, 20]  # written during the submit: no loop iteration to wait
    transient = committer.submit_nowait(3, durable=False, on_written=written.append)
    assert written == [10, 20, 30]  # written during the fsync, not after it
    for _ in range(20):
        await asyncio.sleep(0)
    assert await transient == 30 and not first.done() and not second.done()
    target.release.set()
    assert await first == 10
    assert await second == 20
    assert target.points_taken == [1, 3]  # the second fsync covers what came meanwhile
    assert target.durable == [1, 2, 3] and target.syncs == 2


async def test_a_failed_pipelined_fsync_fails_only_what_it_covered() -> None:
    target = PipelinedTarget()
    target.fail_sync_covering = [1]
    committer: GroupCommitter[int, int] = GroupCommitter(target, FsyncPolicy.parse("always"))
    first = committer.submit_nowait(1)
    for _ in range(20):
        await asyncio.sleep(0)
    second = committer.submit_nowait(2)
    for _ in range(20):
        await asyncio.sleep(0)
    target.release.set()
    with pytest.raises(OSError, match="fsync failed"):
        await first
    assert await second == 20  # written during the failed fsync; the next one held
    assert target.durable == [1, 2]  # the second point covered both writes


async def test_a_real_log_syncs_rolled_segments_while_appends_go_on(tmp_path: Path) -> None:
    from segments.filesystem import RealFileSystem
    from segments.log import LogConfig

    fs = RealFileSystem()
    log = Log.open(fs, str(tmp_path / "q"), LogConfig(segment_bytes_max=4096))
    committer: GroupCommitter[Sequence[Record], AppendResult] = GroupCommitter(
        log, FsyncPolicy.parse("always"))

    async def appender(first: int) -> None:
        for i in range(first, first + 40):
            await committer.submit([Record(i.to_bytes(4, "big") * 64, i)])

    await asyncio.gather(*(appender(k * 1000) for k in range(8)))
    assert log.next_offset == 320 and log.segment_count > 4
    assert not log.wants_sync()
    await committer.close()
    log.close()
    reopened = Log.open(fs, str(tmp_path / "q"))
    assert reopened.recovery.truncated_bytes == 0
    values = sorted(int.from_bytes(r.value[:4], "big") for r in reopened.read(0, 1 << 20))
    assert values == sorted(k * 1000 + i for k in range(8) for i in range(40))
    reopened.close()


def test_a_rolled_segment_waiting_for_its_sync_is_never_evicted() -> None:
    from segments.log import LogConfig

    fs = MemoryFileSystem()
    log = Log.open(fs, "/q", LogConfig(segment_bytes_max=200, open_sealed_segments_max=1))
    for i in range(6):
        log.append([Record(b"x" * 150, i)])  # one segment each
    point = log.sync_point()  # as a committer takes it before its fsync runs
    assert len(point.sealed) == 5
    handles = [segment.handle() for segment in point.sealed]
    for offset in range(6):  # reads meanwhile touch every sealed segment
        assert log.read(offset)[0].offset == offset
    # None was closed (an evicted segment would hand out a new handle when reopened).
    assert all(segment.handle() is handle for segment, handle in
               zip(point.sealed, handles, strict=True))
    point.run()  # the fsync thread's part: syncs and writes indexes of handles still open
    point.finish()
    assert not log.wants_sync()
    for offset in range(6):
        assert log.read(offset)[0].offset == offset
    log.close()


class ClosingTarget(CountingTarget):
    """Closed after its first write: it can take no sync point any more."""

    def sync_point(self) -> None:
        raise LogClosedError("log /q is closed")


async def test_a_target_closed_before_its_fsync_fails_the_items_instead_of_hanging() -> None:
    committer: GroupCommitter[int, int] = GroupCommitter(ClosingTarget(),
                                                         FsyncPolicy.parse("always"))
    with pytest.raises(LogClosedError, match="is closed"):
        await asyncio.wait_for(committer.submit(1), 1.0)
    second = committer.submit_nowait(2)  # the committer itself goes on, failing alike
    with pytest.raises(LogClosedError):
        await asyncio.wait_for(second, 1.0)


async def test_the_commit_port_reports_written_then_durable_or_the_failure() -> None:
    target = CountingTarget()
    committer: GroupCommitter[int, int] = GroupCommitter(target, FsyncPolicy.parse("always"))
    seen: list[tuple[str, object]] = []
    committer.append(1, True, lambda r: seen.append(("written", r)),
                     lambda r: seen.append(("durable", (r, 1 in target.durable))),
                     lambda e: seen.append(("failed", e)))
    await committer.close()
    assert seen == [("written", 10), ("durable", (10, True))]
    failing: GroupCommitter[int, int] = GroupCommitter(target, FsyncPolicy.parse("always"))
    target.fail_next_append = OSError(errno.EIO, "broken")
    failing.append(2, True, None, lambda r: seen.append(("durable", r)),
                   lambda e: seen.append(("failed", e)))
    await failing.close()
    assert seen[-1][0] == "failed" and isinstance(seen[-1][1], OSError)
