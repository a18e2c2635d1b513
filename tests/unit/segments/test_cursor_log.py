from __future__ import annotations

import errno
import os
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segments.cursor_log import ENTRY_SIZE, CursorLog, decode_entry, encode_entry
from segments.errors import DiskFullError, LogClosedError
from segments.filesystem import RealFileSystem
from segments.range_set import RangeSet
from segments.real_file_handle import RealFileHandle


class FlakyHandle:
    """A real handle whose appends can be made to fail after writing a prefix."""

    def __init__(self, inner: RealFileHandle, fs: FlakyFileSystem) -> None:
        self._inner = inner
        self._fs = fs

    @property
    def path(self) -> str:
        return self._inner.path

    def size(self) -> int:
        return self._inner.size()

    def append(self, data: bytes) -> None:
        if self._fs.append_error is not None:
            # Model a short write: part of the data reaches the file before the error.
            self._inner.append(data[: self._fs.partial_bytes])
            raise OSError(self._fs.append_error, os.strerror(self._fs.append_error))
        self._inner.append(data)

    def read_at(self, position: int, length: int) -> bytes:
        return self._inner.read_at(position, length)

    def truncate(self, size: int) -> None:
        self._inner.truncate(size)

    def sync(self) -> None:
        self._inner.sync()

    def close(self) -> None:
        self._inner.close()


class FlakyFileSystem(RealFileSystem):
    def __init__(self) -> None:
        self.append_error: int | None = None
        self.partial_bytes = 0
        self.rename_error: int | None = None
        self.sync_dir_error: int | None = None

    def open(self, path: str) -> FlakyHandle:  # type: ignore[override]
        return FlakyHandle(super().open(path), self)

    def rename(self, source: str, destination: str) -> None:
        if self.rename_error is not None:
            raise OSError(self.rename_error, os.strerror(self.rename_error))
        super().rename(source, destination)

    def sync_dir(self, path: str) -> None:
        if self.sync_dir_error is not None:
            raise OSError(self.sync_dir_error, os.strerror(self.sync_dir_error))
        super().sync_dir(path)


def _path(tmp_path: Path) -> str:
    return str(tmp_path / "queue.cursor")


def _reopen(path: str, compact_min_entries: int = 1024) -> CursorLog:
    return CursorLog.open(RealFileSystem(), path, compact_min_entries=compact_min_entries)


def test_entry_encoding_round_trip() -> None:
    entry = encode_entry(3, 2**64 - 1)
    assert len(entry) == ENTRY_SIZE == 21
    assert decode_entry(entry) == (3, 2**64 - 1)
    assert decode_entry(entry[:-1]) is None
    assert decode_entry(b"\x02" + entry[1:]) is None


def test_append_and_reopen(tmp_path: Path) -> None:
    path = _path(tmp_path)
    log = _reopen(path)
    log.append([(0, 5), (7, 9)])
    log.append([(5, 7)])
    log.sync()
    assert log.acked.ranges() == [(0, 9)]
    assert log.ack_floor == 9
    assert log.entry_count == 3
    log.close()

    reopened = _reopen(path)
    assert reopened.acked.ranges() == [(0, 9)]
    assert reopened.entry_count == 3
    assert os.path.getsize(path) == 3 * ENTRY_SIZE
    reopened.close()


def test_redundant_and_empty_ranges_are_not_written(tmp_path: Path) -> None:
    log = _reopen(_path(tmp_path))
    log.append([(0, 10)])
    log.append([(2, 5), (4, 4), (8, 3)])
    assert log.entry_count == 1
    log.close()


def test_negative_range_is_rejected_before_writing(tmp_path: Path) -> None:
    log = _reopen(_path(tmp_path))
    with pytest.raises(ValueError):
        log.append([(0, 3), (-1, 2)])
    assert log.entry_count == 0
    assert log.acked.ranges() == []
    log.close()


def test_append_group_writes_once_for_all(tmp_path: Path) -> None:
    path = _path(tmp_path)
    log = _reopen(path)
    assert log.append_group([[(0, 2)], [], [(4, 6), (2, 3)]]) == [None, None, None]
    assert log.acked.ranges() == [(0, 3), (4, 6)]
    log.close()
    assert _reopen(path).acked.ranges() == [(0, 3), (4, 6)]


@pytest.mark.parametrize("cut", [1, ENTRY_SIZE - 1, ENTRY_SIZE + 5])
def test_torn_tail_is_truncated(tmp_path: Path, cut: int) -> None:
    path = _path(tmp_path)
    log = _reopen(path)
    for lo in range(0, 30, 3):
        log.append([(lo, lo + 1)])
    log.close()
    full_size = os.path.getsize(path)
    os.truncate(path, full_size - cut)

    reopened = _reopen(path)
    whole_entries = (full_size - cut) // ENTRY_SIZE
    assert reopened.entry_count == whole_entries
    assert reopened.acked.ranges() == [(lo, lo + 1) for lo in range(0, 3 * whole_entries, 3)]
    assert os.path.getsize(path) == whole_entries * ENTRY_SIZE
    # Appends after recovery land on an entry boundary and survive a reopen.
    reopened.append([(100, 101)])
    reopened.close()
    assert (100, 101) in _reopen(path).acked.ranges()


def test_corrupt_entry_in_the_middle_cuts_from_there(tmp_path: Path) -> None:
    path = _path(tmp_path)
    log = _reopen(path)
    for lo in range(0, 50, 5):
        log.append([(lo, lo + 2)])
    log.close()
    with open(path, "r+b") as file:
        file.seek(4 * ENTRY_SIZE + 3)
        byte = file.read(1)
        file.seek(4 * ENTRY_SIZE + 3)
        file.write(bytes([byte[0] ^ 0xFF]))

    reopened = _reopen(path)
    assert reopened.acked.ranges() == [(0, 2), (5, 7), (10, 12), (15, 17)]
    assert os.path.getsize(path) == 4 * ENTRY_SIZE
    reopened.close()


@pytest.mark.parametrize(
    "bad_entry",
    [
        # Unknown kind, with a valid CRC.
        struct.pack("<BQQ", 9, 0, 5),
        # lo >= hi, with a valid CRC.
        struct.pack("<BQQ", 1, 5, 5),
    ],
)
def test_invalid_entries_with_valid_crc_cut_the_log(tmp_path: Path, bad_entry: bytes) -> None:
    import crc32c

    path = _path(tmp_path)
    log = _reopen(path)
    log.append([(0, 1)])
    log.close()
    with open(path, "ab") as file:
        file.write(bad_entry + struct.pack("<I", crc32c.crc32c(bad_entry)))
        file.write(encode_entry(3, 4))
    reopened = _reopen(path)
    assert reopened.acked.ranges() == [(0, 1)]
    assert reopened.entry_count == 1
    reopened.close()


def test_compaction_shrinks_file_and_preserves_set(tmp_path: Path) -> None:
    path = _path(tmp_path)
    log = _reopen(path, compact_min_entries=1_000_000)
    for offset in range(200):
        if offset % 50 != 49:
            log.append([(offset, offset + 1)])
    before = log.acked.copy()
    assert log.entry_count == 196
    log.compact()
    assert log.entry_count == len(before) == 4
    assert os.path.getsize(path) == 4 * ENTRY_SIZE
    assert log.acked == before
    assert not os.path.exists(path + ".tmp")
    # The handle now points at the compacted file.
    log.append([(500, 501)])
    log.close()

    reopened = _reopen(path)
    expected = before.copy()
    expected.add(500, 501)
    assert reopened.acked == expected
    assert reopened.entry_count == 5
    reopened.close()


def test_sync_compacts_once_it_is_due(tmp_path: Path) -> None:
    path = _path(tmp_path)
    log = _reopen(path, compact_min_entries=10)
    for offset in range(0, 40, 2):
        log.append([(offset, offset + 1)])
    assert not log.wants_sync()  # 20 entries for 20 ranges: nothing to gain
    for offset in range(1, 40, 2):
        log.append([(offset, offset + 1)])
    # Due once entries exceed max(10, 2 * ranges + 1); appends never compact (they
    # run on the event loop), the sync does (on a group committer's thread).
    assert log.entry_count == 40 and log.wants_sync()
    log.sync()
    assert log.entry_count == 1 and not log.wants_sync()
    assert log.acked.ranges() == [(0, 40)]
    log.close()
    reopened = _reopen(path)
    assert reopened.acked.ranges() == [(0, 40)]
    reopened.close()


def test_maybe_compact_threshold(tmp_path: Path) -> None:
    log = _reopen(_path(tmp_path), compact_min_entries=0)
    # Three disjoint ranges need three entries: 3 <= 2 * 3 + 1, so no compaction.
    log.append([(0, 1)])
    log.append([(2, 3)])
    log.append([(4, 5)])
    assert log.maybe_compact() is False
    assert log.entry_count == 3
    log.close()


@pytest.mark.parametrize("garbage", [b"", b"half an entry", encode_entry(0, 10_000) * 3])
def test_stray_tmp_file_is_removed_on_open(tmp_path: Path, garbage: bytes) -> None:
    path = _path(tmp_path)
    log = _reopen(path)
    log.append([(0, 3)])
    log.close()
    Path(path + ".tmp").write_bytes(garbage)

    reopened = _reopen(path)
    assert not os.path.exists(path + ".tmp")
    assert reopened.acked.ranges() == [(0, 3)]
    reopened.close()


def test_crash_between_writing_tmp_and_rename_keeps_old_file(tmp_path: Path) -> None:
    path = _path(tmp_path)
    log = _reopen(path, compact_min_entries=1_000_000)
    for offset in range(20):
        log.append([(offset, offset + 1)])
    log.sync()
    # The first half of write_file_atomically ran: tmp complete and synced, no rename.
    Path(path + ".tmp").write_bytes(encode_entry(0, 20))
    log.close()  # the process dies here

    reopened = _reopen(path)
    assert reopened.acked.ranges() == [(0, 20)]
    assert reopened.entry_count == 20
    assert not os.path.exists(path + ".tmp")
    reopened.close()


def test_crash_after_rename_gives_new_file(tmp_path: Path) -> None:
    path = _path(tmp_path)
    log = _reopen(path, compact_min_entries=1_000_000)
    for offset in range(20):
        log.append([(offset, offset + 1)])
    Path(path + ".tmp").write_bytes(encode_entry(0, 20))
    os.replace(path + ".tmp", path)
    log.close()  # the process dies before syncing the directory or reopening

    reopened = _reopen(path)
    assert reopened.acked.ranges() == [(0, 20)]
    assert reopened.entry_count == 1
    reopened.close()


@pytest.mark.parametrize("partial_bytes", [0, 5, ENTRY_SIZE, ENTRY_SIZE + 7])
def test_enospc_on_append_rolls_back(tmp_path: Path, partial_bytes: int) -> None:
    path = _path(tmp_path)
    fs = FlakyFileSystem()
    log = CursorLog.open(fs, path)
    log.append([(0, 2)])
    fs.append_error = errno.ENOSPC
    fs.partial_bytes = partial_bytes

    with pytest.raises(DiskFullError) as raised:
        log.append([(4, 6), (8, 9)])
    assert raised.value.path == path
    assert log.acked.ranges() == [(0, 2)]
    assert log.entry_count == 1
    assert os.path.getsize(path) == ENTRY_SIZE

    fs.append_error = None
    log.append([(2, 4)])
    log.sync()
    assert log.acked.ranges() == [(0, 4)]
    log.close()
    assert _reopen(path).acked.ranges() == [(0, 4)]


def test_other_append_errors_are_reraised_after_rollback(tmp_path: Path) -> None:
    path = _path(tmp_path)
    fs = FlakyFileSystem()
    log = CursorLog.open(fs, path)
    fs.append_error = errno.EIO
    fs.partial_bytes = 3
    with pytest.raises(OSError) as raised:
        log.append_group([[(0, 1)], [(3, 4)]])
    assert raised.value.errno == errno.EIO
    assert log.acked.ranges() == []
    assert os.path.getsize(path) == 0
    log.close()


def test_failed_compaction_before_rename_keeps_log_usable(tmp_path: Path) -> None:
    path = _path(tmp_path)
    fs = FlakyFileSystem()
    log = CursorLog.open(fs, path, compact_min_entries=1_000_000)
    for offset in range(10):
        log.append([(offset, offset + 1)])
    fs.rename_error = errno.EIO
    with pytest.raises(OSError):
        log.compact()
    assert not os.path.exists(path + ".tmp")
    assert log.entry_count == 10
    fs.rename_error = None
    log.append([(10, 11)])
    log.close()
    reopened = _reopen(path)
    assert reopened.acked.ranges() == [(0, 11)]
    assert reopened.entry_count == 11
    reopened.close()


def test_failed_compaction_after_rename_follows_the_new_file(tmp_path: Path) -> None:
    path = _path(tmp_path)
    fs = FlakyFileSystem()
    log = CursorLog.open(fs, path, compact_min_entries=1_000_000)
    for offset in range(10):
        log.append([(offset, offset + 1)])
    fs.sync_dir_error = errno.EIO
    with pytest.raises(OSError):
        log.compact()
    # Retrying the directory sync failed too, so the log refuses further use.
    with pytest.raises(LogClosedError):
        log.append([(10, 11)])
    assert _reopen(path).acked.ranges() == [(0, 10)]


def test_automatic_compaction_failure_does_not_fail_the_sync(tmp_path: Path) -> None:
    path = _path(tmp_path)
    fs = FlakyFileSystem()
    log = CursorLog.open(fs, path, compact_min_entries=4)
    fs.rename_error = errno.ENOSPC
    for offset in range(0, 20, 2):
        log.append([(offset, offset + 1)])
        log.sync()
    for offset in range(1, 20, 2):
        log.append([(offset, offset + 1)])
        log.sync()
    assert log.acked.ranges() == [(0, 20)]
    assert log.entry_count == 20
    fs.rename_error = None
    log.append([(20, 21)])
    log.sync()
    assert log.entry_count == 21  # retries are backed off...
    for offset in range(21, 40):
        log.append([(offset, offset + 1)])
        log.sync()
    assert log.entry_count <= 5  # ...but happen once enough new entries have arrived
    log.close()
    assert _reopen(path).acked.ranges() == [(0, 40)]


def test_closed_log_raises(tmp_path: Path) -> None:
    log = _reopen(_path(tmp_path))
    log.close()
    log.close()
    assert log.closed
    with pytest.raises(LogClosedError):
        log.append([(0, 1)])
    with pytest.raises(LogClosedError):
        log.append_group([[(0, 1)]])
    with pytest.raises(LogClosedError):
        log.sync()
    with pytest.raises(LogClosedError):
        log.compact()
    with pytest.raises(LogClosedError):
        _ = log.acked
    with pytest.raises(LogClosedError):
        _ = log.ack_floor


batches = st.lists(
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=4),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(batches, st.integers(0, 8), st.data())
def test_random_appends_and_reopens_match_model(
    batches: list[list[tuple[int, int]]], compact_min_entries: int, data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "queue.cursor")
        log = _reopen(path, compact_min_entries)
        model: set[int] = set()
        for batch in batches:
            log.append(batch)
            for lo, hi in batch:
                model.update(range(lo, hi))
            if data.draw(st.booleans(), label="reopen"):
                log.sync()
                log.close()
                log = _reopen(path, compact_min_entries)
            assert log.acked == RangeSet((offset, offset + 1) for offset in model)
        log.close()
        final = _reopen(path, compact_min_entries)
        assert final.acked == RangeSet((offset, offset + 1) for offset in model)
        floor = 0
        while floor in model:
            floor += 1
        assert final.ack_floor == floor
        final.close()


def test_forget_from_drops_acks_past_the_log_end_durably(tmp_path: Path) -> None:
    fs = RealFileSystem()
    path = str(tmp_path / "cursor")
    cursor = CursorLog.open(fs, path)
    cursor.append([(0, 5), (7, 12)])
    cursor.sync()
    assert cursor.forget_from(9)
    assert cursor.acked.ranges() == [(0, 5), (7, 9)]
    assert not cursor.forget_from(20)
    cursor.close()
    reopened = CursorLog.open(fs, path)
    assert reopened.acked.ranges() == [(0, 5), (7, 9)]
    reopened.close()
