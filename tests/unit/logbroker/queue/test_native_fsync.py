"""The native fsync thread, and the group committer's fsyncs through it: an item
resolves only after an fdatasync that began after it was written, in order."""

import asyncio
import contextlib
import errno
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from logbroker.queue.fsync_policy import FsyncPolicy
from logbroker.queue.group_commit import GroupCommitter
from logbroker.queue.native_fsync import NativeFsync, available
from segments.filesystem import RealFileSystem
from segments.log import AppendResult, Log, LogConfig
from segments.memory_filesystem import MemoryFileSystem
from segments.record_batch import Record

native = pytest.mark.skipif(not available(), reason="the C extension is not built")


class ManualThread:
    """A stand-in for the native thread that fdatasyncs nothing: the test says when
    each job ends, and with which errno."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        self.jobs: list[tuple[int, ...]] = []
        self._outcome: tuple[int, int] | None = None
        self.closed = False

    def submit(self, fds: Sequence[int], /) -> None:
        assert self._outcome is None, "a second job before the first one's end was taken"
        self.jobs.append(tuple(fds))

    def end_job(self, error: int = 0) -> None:
        self._outcome = (error, 125_000)
        os.write(self._write, b"x")

    def take(self) -> tuple[int, int] | None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._read, 64)
        outcome, self._outcome = self._outcome, None
        return outcome

    def fileno(self) -> int:
        return self._read

    def close(self) -> None:
        self.closed = True
        os.close(self._read)
        os.close(self._write)


async def _turns(count: int = 20) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


class Spy(NativeFsync):
    """The real native thread, counting the jobs it got."""

    def __init__(self) -> None:
        super().__init__()
        self.jobs: list[tuple[int, ...]] = []

    async def fdatasync(self, fds: Sequence[int]) -> float:
        self.jobs.append(tuple(fds))
        return await super().fdatasync(fds)


# ------------------------------------------------------------ the thread alone


@native
async def test_the_native_thread_fdatasyncs_a_file_and_reports_the_time(tmp_path: Path) -> None:
    fsync = NativeFsync()
    with open(tmp_path / "f", "wb") as file:
        file.write(b"x" * 4096)
        file.flush()
        for _ in range(3):  # one job after the other on the same thread
            took = await fsync.fdatasync([file.fileno()])
            assert 0 < took < 30
    fsync.close()
    fsync.close()  # twice is harmless


@native
async def test_a_failed_fdatasync_is_an_oserror_with_its_errno() -> None:
    fsync = NativeFsync()
    read, write = os.pipe()  # a pipe cannot be fdatasynced: EINVAL
    try:
        with pytest.raises(OSError) as failure:
            await fsync.fdatasync([read])
        assert failure.value.errno == errno.EINVAL
    finally:
        os.close(read)
        os.close(write)
        fsync.close()


@native
async def test_bad_descriptor_lists_are_refused_by_name() -> None:
    fsync = NativeFsync()
    with pytest.raises(ValueError, match="is not a file descriptor"):
        await fsync.fdatasync([-1])
    with pytest.raises(ValueError, match="between 1 and 64 descriptors"):
        await fsync.fdatasync([])
    fsync.close()


async def test_a_cancelled_callers_job_is_waited_for_never_overlapped() -> None:
    thread = ManualThread()
    fsync = NativeFsync(lambda: thread)
    first = asyncio.ensure_future(fsync.fdatasync([7]))
    await _turns()
    first.cancel()
    second = asyncio.ensure_future(fsync.fdatasync([8]))
    await _turns()
    assert thread.jobs == [(7,)]  # the second waits: the first still runs
    thread.end_job()
    await _turns()
    assert thread.jobs == [(7,), (8,)] and not second.done()
    thread.end_job()
    assert await second == pytest.approx(125e-6)
    assert first.cancelled()
    fsync.close()
    assert thread.closed


# ------------------------------------------------- the group committer through it


async def test_an_item_resolves_only_after_the_fdatasync_that_covers_it(tmp_path: Path) -> None:
    thread = ManualThread()
    log = Log.open(RealFileSystem(), str(tmp_path / "q"))
    log.sync()  # the directory entry is durable: the next points are fdatasyncs only
    committer: GroupCommitter[Sequence[Record], AppendResult] = GroupCommitter(
        log, FsyncPolicy.parse("always"), native_fsync=NativeFsync(lambda: thread))
    written: list[int] = []
    first = committer.submit_nowait([Record(b"a", 1)], on_written=lambda r: written.append(
        r.base_offset))
    await _turns()
    assert written == [0] and len(thread.jobs) == 1  # written, its fdatasync running
    (fd,) = thread.jobs[0]
    assert os.path.samefile(f"/proc/self/fd/{fd}", tmp_path / "q" / "00000000000000000000.log")
    second = committer.submit_nowait([Record(b"b", 2)], on_written=lambda r: written.append(
        r.base_offset))
    assert written == [0, 1]  # written during the fdatasync, not after it
    await _turns()
    assert not first.done() and not second.done()  # no confirm before its fsync
    thread.end_job()
    await _turns()
    assert first.done() and not second.done()  # that fdatasync began before `b` was written
    assert len(thread.jobs) == 2  # the next one covers it
    thread.end_job()
    await _turns()
    assert (await second).base_offset == 1
    await committer.close()  # its last sync is `sync` on the Python thread, not a point
    assert thread.closed and len(thread.jobs) == 2
    log.close()


async def test_a_failed_fdatasync_fails_exactly_the_items_it_covered(tmp_path: Path) -> None:
    thread = ManualThread()
    log = Log.open(RealFileSystem(), str(tmp_path / "q"))
    log.sync()
    committer: GroupCommitter[Sequence[Record], AppendResult] = GroupCommitter(
        log, FsyncPolicy.parse("always"), native_fsync=NativeFsync(lambda: thread))
    first = committer.submit([Record(b"a", 1)])
    await _turns()
    second = committer.submit([Record(b"b", 2)])
    thread.end_job(errno.EIO)
    await _turns()
    with pytest.raises(OSError, match="Input/output error"):
        await first
    assert not asyncio.ensure_future(second).done()
    thread.end_job()
    assert (await second).base_offset == 1
    await committer.close()
    log.close()


async def test_points_with_more_than_an_fdatasync_and_memory_files_use_the_python_thread(
        tmp_path: Path) -> None:
    spy = Spy()
    log = Log.open(RealFileSystem(), str(tmp_path / "q"), LogConfig(segment_bytes_max=4096))
    committer: GroupCommitter[Sequence[Record], AppendResult] = GroupCommitter(
        log, FsyncPolicy.parse("always"), native_fsync=spy if available() else None)
    for i in range(60):  # rolls a segment every 30 or so
        await committer.submit([Record(b"a" * 100, i)])
    assert log.segment_count > 1
    if available():  # rolled segments and their directory went to Python
        assert 0 < len(spy.jobs) < committer.fsyncs == 60
        assert all(len(job) == 1 for job in spy.jobs)
    await committer.close()
    log.close()
    reopened = Log.open(RealFileSystem(), str(tmp_path / "q"))
    assert reopened.recovery.truncated_bytes == 0 and reopened.next_offset == 60
    reopened.close()

    memory = Log.open(MemoryFileSystem(), "/q")
    memory.sync()
    assert memory.sync_point().fds() is None  # no descriptors: `run` is called
    memory.close()
