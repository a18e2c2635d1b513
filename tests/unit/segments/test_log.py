import errno
import os
from pathlib import Path

import pytest

from segments.errors import (
    CorruptSegmentError,
    DataDirLockedError,
    DiskFullError,
    LogClosedError,
    NonSequentialBatchError,
    OffsetDeletedError,
    OffsetOutOfRangeError,
)
from segments.filesystem import RealFileSystem
from segments.log import Log, LogConfig
from segments.memory_filesystem import MemoryFileSystem
from segments.record_batch import Compression, Record, encode_batch

SMALL = LogConfig(segment_bytes_max=4096, index_interval_bytes=256)


def records(start: int, count: int, size: int = 100, ts: int | None = None) -> list[Record]:
    return [
        Record(f"{i:08d}".encode() * (size // 8), ts if ts is not None else 1000 + i)
        for i in range(start, start + count)
    ]


def open_log(path: Path, config: LogConfig = SMALL) -> Log:
    return Log.open(RealFileSystem(), str(path), config)


def test_offsets_are_dense_and_reads_return_what_was_written(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.next_offset) == (0, 0)
    assert log.append(records(0, 3)).base_offset == 0
    result = log.append_group([records(3, 2), records(5, 4)])
    assert [(r.base_offset, r.next_offset) for r in result] == [(3, 5), (5, 9)]
    read = log.read(4, max_bytes=10_000)
    assert [r.offset for r in read] == list(range(4, 9))
    assert read[0].value == records(4, 1)[0].value
    assert log.read(9) == []
    log.close()


def test_reads_span_segments_and_respect_the_byte_budget(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for start in range(0, 400, 10):
        log.append(records(start, 10))
    assert log.segment_count > 5
    assert [r.offset for r in log.read(0, max_bytes=100_000)] == list(range(400))
    small = log.read(123, max_bytes=1)
    assert small and small[0].offset == 123  # at least one record always
    assert len(log.read(0, max_bytes=2000)) < 400
    log.close()


def test_reopen_finds_everything_and_continues(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for start in range(0, 200, 7):
        log.append(records(start, 7))
    log.close()
    log = open_log(tmp_path)
    assert log.next_offset == 203
    assert log.recovery.truncated_bytes == 0
    log.append(records(203, 1))
    assert [r.offset for r in log.read(195, 10**6)] == list(range(195, 204))
    log.close()


def test_recovery_cuts_a_torn_tail_and_appends_resume(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig())
    log.append(records(0, 5))
    log.append(records(5, 5))
    log.close()
    segment = tmp_path / "00000000000000000000.log"
    with open(segment, "r+b") as f:
        f.truncate(os.path.getsize(segment) - 17)
    log = open_log(tmp_path, LogConfig())
    assert log.next_offset == 5
    assert log.recovery.truncated_bytes > 0
    log.append(records(5, 1))
    assert [r.offset for r in log.read(0)] == list(range(6))
    log.close()


def test_recovery_cuts_a_corrupt_active_tail(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig())
    for start in range(0, 30, 10):
        log.append(records(start, 10))
    log.close()
    segment = tmp_path / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[len(data) * 2 // 3] ^= 0xFF  # lands in the second or third batch
    segment.write_bytes(bytes(data))
    log = open_log(tmp_path, LogConfig())
    assert log.next_offset in (10, 20)
    log.close()


def test_missing_or_damaged_index_of_a_sealed_segment_is_rebuilt(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for start in range(0, 300, 10):
        log.append(records(start, 10))
    log.close()
    indexes = sorted(tmp_path.glob("*.index"))
    indexes[0].unlink()
    indexes[1].write_bytes(b"\xff" * 24)
    # Consistent in structure but pointing at the wrong batch: caught by the header check.
    third = bytearray(indexes[2].read_bytes())
    third[8:16] = third[-8:]
    log = open_log(tmp_path)
    assert [r.offset for r in log.read(0, 10**6)] == list(range(300))
    assert indexes[0].exists()  # rebuilt and written back
    log.close()


def test_corrupt_sealed_segment_is_reported_and_earlier_reads_still_work(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for start in range(0, 300, 10):
        log.append(records(start, 10))
    bases = [base for base, *_ in log.segment_summaries()]
    log.close()
    victim = tmp_path / f"{bases[1]:020d}.log"
    data = bytearray(victim.read_bytes())
    middle = len(data) // 2
    data[middle] ^= 0xFF
    victim.write_bytes(bytes(data))
    log = open_log(tmp_path)
    damaged = []
    for offset in range(bases[1], bases[2]):
        try:
            assert log.read(offset, 1)[0].offset == offset
        except CorruptSegmentError as error:
            assert error.path.endswith(f"{bases[1]:020d}.log")
            assert 0 < error.position < middle
            damaged.append(offset)
    assert len(damaged) == 10  # exactly one batch is lost, the rest of the segment reads
    # A read that starts before the damage returns what precedes it instead of failing.
    before = log.read(damaged[0] - 1, 10**6)
    assert [r.offset for r in before] == [damaged[0] - 1]
    assert log.read(bases[2])[0].offset == bases[2]  # later segments keep working
    log.close()


def test_offset_errors(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for start in range(0, 300, 10):
        log.append(records(start, 10))
    with pytest.raises(OffsetOutOfRangeError):
        log.read(301)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1)
    deleted = log.delete_before(100)
    assert deleted > 0 and 0 < log.log_start_offset <= 100
    with pytest.raises(OffsetDeletedError, match="deleted by retention"):
        log.read(0)
    log.close()


def test_retention_deletes_whole_segments_and_survives_reopen(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for start in range(0, 300, 10):
        log.append(records(start, 10))
    log.delete_before(300)  # everything consumed: even the active segment goes
    assert log.log_start_offset == 300 == log.next_offset
    assert log.segment_count == 1
    log.close()
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.next_offset) == (300, 300)
    log.append(records(300, 1))
    assert log.read(300)[0].offset == 300
    log.close()


def test_truncate_to_mid_batch_and_across_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for start in range(0, 300, 10):
        log.append(records(start, 10))
    log.truncate_to(155)  # inside a batch, several segments back
    assert log.next_offset == 155
    assert [r.offset for r in log.read(140, 10**6)] == list(range(140, 155))
    log.append(records(155, 3))
    log.close()
    log = open_log(tmp_path)
    assert log.next_offset == 158
    assert [r.value for r in log.read(150, 10**6)] == [r.value for r in records(150, 8)]
    log.truncate_to(log.log_start_offset)
    assert log.next_offset == 0
    log.close()


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(records(0, 10))
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.next_offset) == (1000, 1000)
    log.append(records(0, 2))
    log.close()
    log = open_log(tmp_path)
    assert [r.offset for r in log.read(1000)] == [1000, 1001]
    log.close()


def test_offset_for_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for start in range(0, 300, 10):
        log.append(records(start, 10))  # record i has timestamp 1000 + i
    assert log.offset_for_timestamp(0) == 0
    assert log.offset_for_timestamp(1150) == 150
    assert log.offset_for_timestamp(1299) == 299
    assert log.offset_for_timestamp(5000) == 300
    log.close()
    log = open_log(tmp_path)  # from the index files
    assert log.offset_for_timestamp(1077) == 77
    log.close()


def test_roll_by_age(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_ms_max=1000))
    log.append(records(0, 1, ts=0))
    log.append(records(1, 1, ts=500))
    assert log.segment_count == 1
    log.append(records(2, 1, ts=1000))
    assert log.segment_count == 2
    log.close()


def test_compressed_log_round_trip(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(compression=Compression.ZSTD))
    log.append(records(0, 50, size=1000))
    assert log.size_bytes < 50 * 1000 // 4
    log.truncate_to(25)
    log.close()
    log = open_log(tmp_path, LogConfig(compression=Compression.ZSTD))
    assert [r.value for r in log.read(0)] == [r.value for r in records(0, 25, size=1000)]
    log.close()


def test_raw_batches_are_validated_and_must_be_sequential(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_raw_batch(encode_batch(0, records(0, 3)))
    with pytest.raises(NonSequentialBatchError):
        log.append_raw_batch(encode_batch(7, records(0, 1)))
    assert log.next_offset == 3
    log.close()


def test_locked_directory_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    with pytest.raises(DataDirLockedError):
        open_log(tmp_path)
    log.close()
    open_log(tmp_path).close()


def test_closed_log_refuses_use(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.close()
    log.close()
    with pytest.raises(LogClosedError):
        log.append(records(0, 1))


def test_disk_full_rolls_back_and_appends_resume_when_space_returns() -> None:
    fs = MemoryFileSystem()
    log = Log.open(fs, "/q", SMALL)
    for start in range(0, 50, 10):
        log.append(records(start, 10))
    log.sync()
    fs.set_capacity(fs.used_bytes + 500)  # room for part of the next batch only
    for _ in range(3):
        with pytest.raises(DiskFullError) as raised:
            log.append(records(50, 10))
        assert raised.value.__cause__ is not None
        assert raised.value.__cause__.errno == errno.ENOSPC  # type: ignore[attr-defined]
    assert log.next_offset == 50
    assert [r.offset for r in log.read(0, 10**6)] == list(range(50))
    fs.set_capacity(None)
    assert log.append(records(50, 10)).base_offset == 50
    log.close()
    log = Log.open(fs, "/q", SMALL)
    assert [r.offset for r in log.read(0, 10**6)] == list(range(60))
    log.close()


def test_config_is_validated() -> None:
    with pytest.raises(ValueError):
        LogConfig(segment_bytes_max=0)
    with pytest.raises(ValueError):
        LogConfig(index_interval_bytes=0)


def test_recovery_scans_only_segments_not_yet_confirmed() -> None:
    fs = MemoryFileSystem()
    log = Log.open(fs, "/q", SMALL)
    for start in range(0, 300, 10):
        log.append(records(start, 10))
    log.sync()  # confirms every rolled segment
    active_base = log.segment_summaries()[-1][0]
    active_bytes = fs.file_size(f"/q/{active_base:020d}.log")
    fs.crash_losing_all_unsynced()
    log = Log.open(fs, "/q", SMALL)
    assert log.recovery.scanned_bytes == active_bytes  # older segments were trusted
    assert log.next_offset == 300
    log.close()


def test_unsynced_rolled_segments_are_cut_back_to_what_was_synced() -> None:
    fs = MemoryFileSystem()
    log = Log.open(fs, "/q", SMALL)
    for start in range(0, 100, 10):
        log.append(records(start, 10))
    log.sync()
    synced_segments = log.segment_count
    for start in range(100, 300, 10):
        log.append(records(start, 10))  # several rolls, never synced
    assert log.segment_count > synced_segments + 2
    assert log.wants_sync()
    fs.crash_losing_all_unsynced()
    log = Log.open(fs, "/q", SMALL)
    assert log.next_offset == 100
    assert [r.offset for r in log.read(0, 10**6)] == list(range(100))
    log.append(records(100, 1))
    log.close()


def test_detached_segments_are_gone_from_the_log_before_their_files(tmp_path: Path) -> None:
    from segments.log import delete_detached

    log = open_log(tmp_path)
    for start in range(0, 300, 10):
        log.append(records(start, 10))
    log.sync()
    files_before = len(list(tmp_path.glob("*.log")))
    detached = log.detach_before(150)
    assert detached and log.log_start_offset == detached[-1].next_offset
    assert len(list(tmp_path.glob("*.log"))) == files_before  # files still there
    delete_detached(log.fs, log.directory, detached)
    assert len(list(tmp_path.glob("*.log"))) == files_before - len(detached)
    log.close()
