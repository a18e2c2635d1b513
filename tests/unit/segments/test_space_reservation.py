"""Disk blocks reserved ahead of a growing file: never visible, always given back."""

import ctypes
import errno
import os
from pathlib import Path

import pytest

import segments.space_reservation as space_reservation
from segments.filesystem import RealFileSystem
from segments.log import Log, LogConfig
from segments.real_file_handle import RealFileHandle
from segments.record_batch import Record
from segments.space_reservation import (
    RESERVE_AHEAD_BYTES_MAX,
    RESERVE_FROM_FILE_BYTES,
    reserve,
    reserve_ahead_bytes,
)

CHUNK = bytes(range(256)) * 400  # 100 KiB
# Blocks a file may hold beyond its data without any reservation: the last partial
# block, and the file system's own extent-tree blocks, which st_blocks counts too.
SLACK = 64 << 10


def _allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def _reserving_fs(path: Path) -> None:
    """Skip where this kernel or file system cannot reserve (the feature is then off)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if reserve(fd, 0, 1 << 20) is not True:
            pytest.skip("fallocate(KEEP_SIZE) is not available here")
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def _grow(handle: RealFileHandle, total_bytes: int) -> bytes:
    written = bytearray()
    while len(written) < total_bytes:
        handle.append_parts([b"h", CHUNK])
        written += b"h" + CHUNK
    return bytes(written)


def test_ahead_is_zero_for_small_files_and_bounded_for_big_ones() -> None:
    assert reserve_ahead_bytes(0) == 0
    assert reserve_ahead_bytes(RESERVE_FROM_FILE_BYTES - 1) == 0
    assert reserve_ahead_bytes(RESERVE_FROM_FILE_BYTES) == RESERVE_FROM_FILE_BYTES // 4
    assert reserve_ahead_bytes(1 << 30) == RESERVE_AHEAD_BYTES_MAX


def test_a_growing_file_holds_blocks_past_its_end_and_close_gives_them_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "segment.log"
    _reserving_fs(path)
    handle = RealFileHandle(str(path))
    data = _grow(handle, 3 << 20)
    assert os.path.getsize(path) == handle.size() == len(data)  # the size never moves
    assert _allocated(path) > len(data) + (256 << 10)
    assert handle.read_at(0, len(data)) == data
    handle.close()
    assert _allocated(path) <= len(data) + SLACK
    assert path.read_bytes() == data


def test_truncate_gives_blocks_back_and_appends_go_on(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    _reserving_fs(path)
    handle = RealFileHandle(str(path))
    data = _grow(handle, 2 << 20)
    handle.truncate(handle.size())  # as a seal does
    assert _allocated(path) <= len(data) + SLACK
    more = _grow(handle, 2 << 20)
    assert _allocated(path) > len(data) + len(more) + SLACK
    handle.truncate(len(data))
    assert _allocated(path) <= len(data) + SLACK
    handle.append(b"tail")
    handle.sync()
    handle.close()
    assert path.read_bytes() == data + b"tail"


def test_blocks_left_by_a_process_that_died_are_given_back_on_close(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    _reserving_fs(path)
    path.write_bytes(CHUNK)
    fd = os.open(path, os.O_RDWR)
    assert reserve(fd, len(CHUNK), 8 << 20)
    os.close(fd)  # as a killed process would: no truncate
    assert _allocated(path) > len(CHUNK) + (4 << 20)
    handle = RealFileHandle(str(path))
    assert handle.read_at(0, len(CHUNK) + 10) == CHUNK
    handle.close()
    assert _allocated(path) <= len(CHUNK) + SLACK
    assert path.read_bytes() == CHUNK


def test_a_sealed_segment_keeps_no_reserved_blocks(tmp_path: Path) -> None:
    _reserving_fs(tmp_path / "probe")
    log = Log.open(RealFileSystem(), str(tmp_path / "log"), LogConfig(segment_bytes_max=4 << 20))
    for index in range(60):
        log.append([Record(CHUNK, 1_000 + index)])
    assert log.segment_count > 1
    sealed = log._chain.all()[:-1]
    for segment in sealed:
        assert _allocated(Path(segment.log_path)) <= segment.size + SLACK
    log.close()


@pytest.mark.parametrize("code, tries_again", [
    (errno.ENOSPC, True),  # a full disk now: the write decides, and later appends try again
    (errno.EOPNOTSUPP, False),  # a file system without fallocate: reservation turns off
])
def test_a_refused_reservation_never_fails_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, tries_again: bool
) -> None:
    calls: list[int] = []

    def fallocate(fd: int, mode: int, start: int, length: int) -> int:
        calls.append(length)
        ctypes.set_errno(code)
        return -1

    monkeypatch.setattr(space_reservation, "_fallocate", fallocate)
    handle = RealFileHandle(str(tmp_path / "f"))
    data = _grow(handle, 3 << 20)
    assert handle.read_at(0, len(data)) == data
    assert (len(calls) > 1) is tries_again and calls
    handle.close()
