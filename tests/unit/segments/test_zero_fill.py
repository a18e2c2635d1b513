"""Zeros filled ahead of a synced log's data: invisible to readers, cut at seal, close
and recovery, never counted as lost data, and a full disk only stops the filling."""

import errno
import os
import random
import shutil
from pathlib import Path

import pytest

from segments.filesystem import RealFileHandle, RealFileSystem
from segments.log import Log, LogConfig
from segments.memory_filesystem import MemoryFileSystem
from segments.record_batch import Record
from segments.zero_fill import FILL_AHEAD_BYTES, FILL_MIN_BYTES, fill_end, write_zeros

SEGMENT_MAX = 64 << 20


def test_fill_is_due_only_when_few_zeros_are_left_and_stops_at_the_segment_limit() -> None:
    big = 8 * FILL_AHEAD_BYTES  # a quarter of it is more than FILL_AHEAD_BYTES
    assert fill_end(big, big, SEGMENT_MAX) == big + FILL_AHEAD_BYTES
    assert fill_end(big, big + FILL_AHEAD_BYTES // 2, SEGMENT_MAX) is None
    assert fill_end(big, big + FILL_AHEAD_BYTES // 2 - 1, SEGMENT_MAX) == big + FILL_AHEAD_BYTES
    # A quarter of the data ahead, and nothing at all for small files.
    assert fill_end(4 * FILL_MIN_BYTES, 4 * FILL_MIN_BYTES, SEGMENT_MAX) == 5 * FILL_MIN_BYTES
    assert fill_end(4 * FILL_MIN_BYTES - 4, 0, SEGMENT_MAX) is None
    assert fill_end(0, 0, SEGMENT_MAX) is None
    # Near the roll point, a fill too small to matter is not done at all.
    assert fill_end(SEGMENT_MAX - 100, SEGMENT_MAX - 100, SEGMENT_MAX) is None


def test_write_zeros_stops_quietly_on_a_full_disk_and_raises_other_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []

    def full_after_one(fd: int, data: memoryview, position: int) -> int:
        if calls:
            raise OSError(errno.ENOSPC, "full")
        calls.append(position)
        return len(data)

    monkeypatch.setattr(os, "pwrite", full_after_one)
    assert write_zeros(3, 100, 100 + (1 << 20)) == 100 + (256 << 10)

    def broken(fd: int, data: memoryview, position: int) -> int:
        raise OSError(errno.EIO, "broken")

    monkeypatch.setattr(os, "pwrite", broken)
    with pytest.raises(OSError):
        write_zeros(3, 0, 10)


BASE = random.Random(0).randbytes(4 * FILL_AHEAD_BYTES)  # enough for a full stretch of zeros


def test_a_real_handle_appends_over_its_zeros_and_cuts_them_on_release(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    handle = RealFileHandle(str(path))
    handle.append(BASE)
    handle.fill_ahead(SEGMENT_MAX)
    end = len(BASE)
    assert handle.size() == end
    assert os.path.getsize(path) == end + FILL_AHEAD_BYTES
    handle.append_parts([b"sec", b"ond"])
    assert handle.size() == end + 6
    assert handle.read_at(end - 2, 8) == BASE[-2:] + b"second"
    assert path.read_bytes()[end + 6 :] == bytes(FILL_AHEAD_BYTES - 6)  # zeros, not old data
    handle.fill_ahead(SEGMENT_MAX)  # plenty left: nothing more is written
    assert os.path.getsize(path) == end + FILL_AHEAD_BYTES
    handle.release_space()
    assert os.path.getsize(path) == end + 6
    handle.append(b"!")  # positional writes go on at the end of the data
    handle.close()
    assert path.read_bytes() == BASE + b"second!"


def test_appends_past_the_zeros_extend_the_file_and_truncate_resets(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    handle = RealFileHandle(str(path))
    handle.append(BASE)
    handle.fill_ahead(SEGMENT_MAX)
    big = random.Random(1).randbytes(FILL_AHEAD_BYTES + 1000)
    handle.append(big)
    assert handle.size() == os.path.getsize(path) == len(BASE) + len(big)
    handle.fill_ahead(SEGMENT_MAX)
    assert os.path.getsize(path) > handle.size()
    handle.truncate(10)
    assert handle.size() == os.path.getsize(path) == 10
    handle.append(b"x")
    handle.close()
    assert path.read_bytes() == BASE[:10] + b"x"


def _committed(log: Log) -> None:
    """Sync as a group committer does (a sync point): the kind of sync that fills."""
    point = log.sync_point()
    point.run()
    point.finish()


def _records(count: int, seed: int) -> list[Record]:
    rng = random.Random(seed)
    return [Record(rng.randbytes(rng.randrange(1, 3000)), i) for i in range(count)]


def test_a_log_opened_from_files_with_zeros_ahead_loses_nothing_and_cuts_them(
    tmp_path: Path,
) -> None:
    log = Log.open(RealFileSystem(), str(tmp_path / "live"))
    records = _records(400, seed=2)
    log.append(records[:300])
    _committed(log)  # fills zeros ahead of the data
    log.append(records[300:])
    _committed(log)
    [segment_file] = [name for name in os.listdir(tmp_path / "live") if name.endswith(".log")]
    assert os.path.getsize(tmp_path / "live" / segment_file) > log.size_bytes
    # What a kill -9 leaves on disk: the files as they are, zeros included.
    shutil.copytree(tmp_path / "live", tmp_path / "copy", ignore=shutil.ignore_patterns(".lock"))
    log.close()
    assert os.path.getsize(tmp_path / "live" / segment_file) == Log.open(
        RealFileSystem(), str(tmp_path / "live")).size_bytes
    reopened = Log.open(RealFileSystem(), str(tmp_path / "copy"))
    assert reopened.recovery.truncated_bytes == 0  # zeros are not lost data
    assert [r.value for r in reopened.read(0, 1 << 30)] == [r.value for r in records]
    assert os.path.getsize(tmp_path / "copy" / segment_file) == reopened.size_bytes
    reopened.append(records[:1])
    assert reopened.next_offset == 401
    reopened.close()


def test_a_torn_batch_before_the_zeros_is_counted_as_cut(tmp_path: Path) -> None:
    log = Log.open(RealFileSystem(), str(tmp_path / "q"))
    log.append(_records(300, seed=3))
    _committed(log)
    size = log.size_bytes
    [name] = [n for n in os.listdir(tmp_path / "q") if n.endswith(".log")]
    fd = os.open(tmp_path / "q" / name, os.O_WRONLY)
    os.pwrite(fd, b"\x07" * 40, size)  # a write that tore inside the filled zeros
    os.close(fd)
    shutil.copytree(tmp_path / "q", tmp_path / "copy", ignore=shutil.ignore_patterns(".lock"))
    log.close()
    reopened = Log.open(RealFileSystem(), str(tmp_path / "copy"))
    assert reopened.recovery.truncated_bytes == 40
    assert reopened.next_offset == 300
    reopened.close()


def test_rolled_segments_keep_no_zeros(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes_max=2 << 20)
    log = Log.open(RealFileSystem(), str(tmp_path / "q"), config)
    for seed in range(40):
        log.append(_records(100, seed))
        _committed(log)
    assert log.segment_count > 2
    summaries = log.segment_summaries()
    directory = tmp_path / "q"
    sealed = sorted(n for n in os.listdir(directory) if n.endswith(".log"))[:-1]
    for name, (_, _, size, _) in zip(sealed, summaries, strict=False):
        assert os.path.getsize(directory / name) == size
    log.close()


def test_memory_handle_fills_and_a_crash_keeps_a_valid_prefix_with_every_synced_record(
) -> None:
    for seed in range(40):
        fs = MemoryFileSystem()
        log = Log.open(fs, "/q")
        rng = random.Random(seed)
        synced: list[bytes] = []
        written: list[bytes] = []
        for step in range(8):
            batch = _records(rng.randrange(1, 300), seed * 10 + step)
            log.append(batch)
            written += [r.value for r in batch]
            if rng.randrange(2):
                _committed(log)
                synced = list(written)
        fs.crash(rng)
        reopened = Log.open(fs, "/q")
        values = [r.value for r in reopened.read(0, 1 << 30)]
        assert values == written[: len(values)], seed
        assert len(values) >= len(synced), seed
        reopened.close()


def test_memory_handle_stops_filling_on_a_full_disk_and_appends_go_on() -> None:
    fs = MemoryFileSystem()
    handle = fs.open("/f")
    handle.append(BASE)
    fs.set_capacity(fs.used_bytes + 1000)
    handle.fill_ahead(SEGMENT_MAX)  # partly filled, no error
    assert handle.size() == len(BASE) and fs.used_bytes == len(BASE) + 1000
    handle.append(b"def")  # lands on the zeros: needs no new space
    assert handle.read_at(len(BASE), 10) == b"def" + bytes(7)
    handle.close()
    assert fs.snapshot_bytes("/f") == BASE + b"def"


def test_the_cut_counts_what_precedes_the_zeros_whatever_the_chunking() -> None:
    from segments.segment import _bytes_before_zeros

    fs = MemoryFileSystem()
    handle = fs.open("/f")
    handle.append(b"d" * 100 + b"torn\x00tail" + bytes(5000))
    for chunk in (1, 3, 7, 64, 1 << 20):
        assert _bytes_before_zeros(handle, 100, 5109, chunk) == 9  # "torn\0tail"
        assert _bytes_before_zeros(handle, 109, 5109, chunk) == 0
    assert _bytes_before_zeros(handle, 5109, 5109) == 0


def test_explicit_syncs_fill_nothing(tmp_path: Path) -> None:
    """A close, a truncation or an interval sync confirms no waiting append: zeros there
    would only be written to be cut again."""
    log = Log.open(RealFileSystem(), str(tmp_path / "q"))
    log.append(_records(300, seed=9))
    log.sync()
    [name] = [n for n in os.listdir(tmp_path / "q") if n.endswith(".log")]
    assert os.path.getsize(tmp_path / "q" / name) == log.size_bytes
    log.close()
