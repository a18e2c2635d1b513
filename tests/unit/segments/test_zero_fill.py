"""Zeros filled ahead of a synced log's data: invisible to readers, cut at seal, close
and recovery, never counted as lost data, and a full disk only stops the filling.
The real handle fills on its own, in an append after a sync (`real_file_handle`)."""

import errno
import os
import random
import shutil
from pathlib import Path

import pytest

from segments.filesystem import RealFileSystem
from segments.log import Log, LogConfig
from segments.memory_filesystem import MemoryFileSystem
from segments.real_file_handle import RealFileHandle
from segments.record_batch import Record
from segments.zero_fill import FILL_AHEAD_BYTES, FILL_MIN_BYTES, fill_end, write_zeros


def test_fill_is_due_only_when_few_zeros_are_left() -> None:
    big = 8 * FILL_AHEAD_BYTES  # a quarter of it is more than FILL_AHEAD_BYTES
    assert fill_end(big, big) == big + FILL_AHEAD_BYTES
    assert fill_end(big, big + FILL_AHEAD_BYTES // 2) is None
    assert fill_end(big, big + FILL_AHEAD_BYTES // 2 - 1) == big + FILL_AHEAD_BYTES
    # A quarter of the data ahead, and nothing at all for small files.
    assert fill_end(4 * FILL_MIN_BYTES, 4 * FILL_MIN_BYTES) == 5 * FILL_MIN_BYTES
    assert fill_end(4 * FILL_MIN_BYTES - 4, 0) is None
    assert fill_end(0, 0) is None
    # A fill that would add too little to matter is not done at all.
    assert fill_end(8 * FILL_MIN_BYTES, 8 * FILL_MIN_BYTES + FILL_MIN_BYTES + 1) is None


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


def test_an_unsynced_file_gets_no_zeros(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    handle = RealFileHandle(str(path))
    handle.append(BASE)
    handle.append(BASE)
    assert os.path.getsize(path) == handle.size() == 2 * len(BASE)
    handle.close()


def test_a_real_handle_appends_over_its_zeros_and_cuts_them_on_truncate(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    handle = RealFileHandle(str(path))
    handle.append(BASE)
    handle.sync()
    handle.append(b"sec")  # the first append after a sync fills
    end = len(BASE) + 3
    assert handle.size() == end
    assert os.path.getsize(path) == end + FILL_AHEAD_BYTES
    handle.append_parts([b"o", b"nd"])
    assert handle.size() == end + 3
    assert handle.read_at(end - 5, 8) == BASE[-2:] + b"second"
    assert path.read_bytes()[end + 3 :] == bytes(FILL_AHEAD_BYTES - 3)  # zeros, not old data
    handle.sync()
    handle.append(b"?")  # plenty left: nothing more is written
    assert os.path.getsize(path) == end + FILL_AHEAD_BYTES
    handle.truncate(handle.size() - 1)  # as a seal does: the file ends with its data
    assert os.path.getsize(path) == end + 3
    handle.append(b"!")  # positional writes go on at the end of the data
    handle.close()
    assert path.read_bytes() == BASE + b"second!"


def test_appends_past_the_zeros_extend_the_file_and_truncate_resets(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    handle = RealFileHandle(str(path))
    handle.append(BASE)
    handle.sync()
    handle.append(b"fill")
    big = random.Random(1).randbytes(FILL_AHEAD_BYTES + 1000)
    handle.append(big)  # no sync since the fill: no new one
    assert handle.size() == os.path.getsize(path) == len(BASE) + 4 + len(big)
    handle.sync()
    handle.append(b"fill")
    assert os.path.getsize(path) > handle.size()
    handle.truncate(10)
    assert handle.size() == os.path.getsize(path) == 10
    handle.append(b"x")
    handle.close()
    assert path.read_bytes() == BASE[:10] + b"x"


def _committed(log: Log) -> None:
    """Sync as a group committer does (a sync point); the next append fills."""
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
    _committed(log)
    log.append(records[300:])  # fills zeros ahead of the data
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
    log.append(_records(1, seed=4))  # fills zeros ahead of the data
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
    assert reopened.next_offset == 301
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


def test_a_crash_keeps_a_valid_prefix_with_every_synced_record() -> None:
    """The memory file system fills no zeros (the real handle's own business); a
    crash of a log synced as a group committer syncs keeps what was synced."""
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


def test_a_real_handle_stops_filling_on_a_full_disk_and_appends_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "f"
    handle = RealFileHandle(str(path))
    handle.append(BASE)
    handle.sync()
    real_pwrite = os.pwrite

    def full_after_one_chunk(fd: int, data: memoryview, position: int) -> int:
        if position > len(BASE) + 3:
            raise OSError(errno.ENOSPC, "full")
        return real_pwrite(fd, data, position)

    monkeypatch.setattr(os, "pwrite", full_after_one_chunk)  # what zero fills write with
    handle.append(b"abc")  # partly filled, no error
    filled = os.path.getsize(path)
    assert handle.size() == len(BASE) + 3 < filled < len(BASE) + 3 + FILL_AHEAD_BYTES
    handle.append(b"def")  # lands on the zeros: needs no new space
    assert os.path.getsize(path) == filled
    assert handle.read_at(len(BASE), 10) == b"abcdef" + bytes(4)
    handle.close()
    assert path.read_bytes() == BASE + b"abcdef"


def test_the_cut_counts_what_precedes_the_zeros_whatever_the_chunking() -> None:
    from segments.segment import _bytes_before_zeros

    fs = MemoryFileSystem()
    handle = fs.open("/f")
    handle.append(b"d" * 100 + b"torn\x00tail" + bytes(5000))
    for chunk in (1, 3, 7, 64, 1 << 20):
        assert _bytes_before_zeros(handle, 100, 5109, chunk) == 9  # "torn\0tail"
        assert _bytes_before_zeros(handle, 109, 5109, chunk) == 0
    assert _bytes_before_zeros(handle, 5109, 5109) == 0


def test_syncs_fill_nothing(tmp_path: Path) -> None:
    """Zeros are written by the appends after a sync, never by the sync itself: the
    sync of a close or a truncation is followed by no append to land on them."""
    log = Log.open(RealFileSystem(), str(tmp_path / "q"))
    log.append(_records(300, seed=9))
    log.sync()
    [name] = [n for n in os.listdir(tmp_path / "q") if n.endswith(".log")]
    assert os.path.getsize(tmp_path / "q" / name) == log.size_bytes
    log.close()
