"""The meta sidecar: a sealed segment's `SegmentFacts`, written once beside the log.

Why: a restart must not decode every queued message to learn its size,
priority and expiry (issue 28). A sealed segment never changes, so the facts
of its messages are written once, column by column, and a restart reads them
back with `array.frombytes`: a few bytes a message, no object per message.

Layout of `<queue>/meta/<base offset>.meta` (little-endian):

    magic           4s   b"LBMS"
    version         u16  1
    base_offset     i64  the segment's
    next_offset     i64  the segment's
    segment_bytes   u64  the segment file's size when the facts were taken
    last_batch_crc  u32  the CRC of the segment's last batch
    5 x (length u32, crc32c u32) of the columns: sizes (u32 each), priorities
                         (u8), timestamps (i64), expirations (i64, or empty when no
                         message has one), transient (u32 relative offsets)
    header crc32c   u32  over everything above
    the columns, back to back

Correctness never depends on a sidecar: one that is missing, unreadable, fails
a checksum or describes another segment (other base, next offset or size; or,
where a replica may have cut its log back and written again, another last
batch) is not used, and the segment is
scanned instead. So a sidecar is written without fsync: a crash can at worst
leave one that fails its checksum.
"""

from __future__ import annotations

import contextlib
import os
import struct
import sys
from array import array
from collections.abc import Callable

import crc32c

from logbroker.queue.segment_facts import SegmentFacts
from segments.filesystem import FileSystem

MAGIC = b"LBMS"
VERSION = 1
DIRECTORY = "meta"
SUFFIX = ".meta"
_HEAD = struct.Struct("<4sHqqQI" + "II" * 5)
_CRC = struct.Struct("<I")
HEADER_SIZE = _HEAD.size + _CRC.size
_KINDS = ("I", "B", "q", "q", "I")  # sizes, priorities, timestamps, expirations, transient


def sidecar_directory(queue_directory: str) -> str:
    return os.path.join(queue_directory, DIRECTORY)


def sidecar_path(directory: str, base_offset: int) -> str:
    return os.path.join(directory, f"{base_offset:020d}{SUFFIX}")


def base_offset_of(file_name: str) -> int | None:
    """The base offset a sidecar's file name says (None: not a sidecar's name)."""
    stem, suffix = os.path.splitext(file_name)
    return int(stem) if suffix == SUFFIX and stem.isdigit() else None


def encode_sidecar(facts: SegmentFacts, segment_bytes: int) -> bytes:
    columns = [_little_endian(column) for column in (
        facts.sizes, facts.priorities, facts.timestamps, facts.expirations, facts.transient)]
    lengths = [field for column in columns for field in (len(column), crc32c.crc32c(column))]
    head = _HEAD.pack(MAGIC, VERSION, facts.base_offset, facts.next_offset, segment_bytes,
                      facts.last_batch_crc, *lengths)
    return b"".join([head, _CRC.pack(crc32c.crc32c(head)), *columns])


def decode_sidecar(data: bytes, base_offset: int, next_offset: int, segment_bytes: int,
                   with_timestamps: bool = True, last_batch_crc: int | None = None
                   ) -> SegmentFacts | None:
    """The facts in `data` if it is a whole, valid sidecar of that segment (else None)."""
    return _decoded(lambda position, length: data[position:position + length], len(data),
                    base_offset, next_offset, segment_bytes, with_timestamps, last_batch_crc)


def read_sidecar(fs: FileSystem, path: str, base_offset: int, next_offset: int,
                 segment_bytes: int, with_timestamps: bool = True,
                 last_batch_crc: int | None = None) -> SegmentFacts | None:
    """`decode_sidecar` of the file at `path` (None: missing, unreadable or not valid),
    reading only the columns wanted. `with_timestamps` False skips that column when no
    message has its own expiration (a queue without a TTL needs none); a
    `last_batch_crc` must match the one the sidecar was written with."""
    if not fs.exists(path):
        return None
    try:
        handle = fs.open(path)
        try:
            return _decoded(handle.read_at, handle.size(), base_offset, next_offset,
                            segment_bytes, with_timestamps, last_batch_crc)
        finally:
            handle.close()
    except OSError:
        return None


def _decoded(read: Callable[[int, int], bytes], total: int, base_offset: int,
             next_offset: int, segment_bytes: int, with_timestamps: bool,
             last_batch_crc: int | None) -> SegmentFacts | None:
    header = _header(read(0, HEADER_SIZE), base_offset, next_offset, segment_bytes,
                     last_batch_crc)
    if header is None:
        return None
    crc_of_last_batch, *fields = header
    if HEADER_SIZE + sum(fields[0::2]) != total:
        return None
    count = next_offset - base_offset
    skip_timestamps = not with_timestamps and not fields[6]  # no expirations either
    columns: list[array[int]] = []
    position = HEADER_SIZE
    for index, kind in enumerate(_KINDS):
        length, crc = fields[2 * index], fields[2 * index + 1]
        column: array[int] | None = array(kind)
        if not (index == 2 and skip_timestamps):
            column = _column(kind, read(position, length), crc)
        if column is None:
            return None
        columns.append(column)
        position += length
    sizes, priorities, timestamps, expirations, transient = columns
    expected = (count, count, 0 if skip_timestamps else count)
    if (len(sizes), len(priorities), len(timestamps)) != expected:
        return None
    if len(expirations) not in (0, count) or any(r >= count for r in transient):
        return None
    return SegmentFacts(base_offset, sizes, priorities, timestamps, expirations, transient,
                        crc_of_last_batch)


def write_sidecar(fs: FileSystem, path: str, facts: SegmentFacts, segment_bytes: int) -> None:
    """Replace `path` with the sidecar of `facts` (written whole, then renamed; no fsync:
    see the module docstring)."""
    temporary_path = path + ".tmp"
    if fs.exists(temporary_path):
        fs.remove(temporary_path)
    handle = fs.open(temporary_path)
    try:
        handle.append(encode_sidecar(facts, segment_bytes))
    finally:
        handle.close()
    fs.rename(temporary_path, path)


def remove_sidecar(fs: FileSystem, path: str) -> None:
    """Remove the sidecar at `path`, if there is one (its segment was deleted)."""
    # The sidecar writer may remove the same file from the loop meanwhile.
    with contextlib.suppress(FileNotFoundError):
        fs.remove(path)


def remove_sidecars(fs: FileSystem, directory: str, keep: set[int]) -> None:
    """Remove every sidecar (and leftover temporary file) whose base offset is not in
    `keep`: their segments were deleted, or cut back."""
    if not fs.exists(directory):
        return
    for name in fs.listdir(directory):
        base = base_offset_of(name)
        if base is None or base not in keep:
            remove_sidecar(fs, os.path.join(directory, name))


def _header(head: bytes, base_offset: int, next_offset: int, segment_bytes: int,
            last_batch_crc: int | None) -> tuple[int, ...] | None:
    """(last batch CRC, then length and CRC of each column), if valid and of that segment."""
    if len(head) != HEADER_SIZE:
        return None
    if crc32c.crc32c(head[:_HEAD.size]) != _CRC.unpack_from(head, _HEAD.size)[0]:
        return None
    magic, version, base, next_, size, crc, *fields = _HEAD.unpack_from(head)
    if (magic, version, base, next_, size) != (MAGIC, VERSION, base_offset, next_offset,
                                               segment_bytes):
        return None
    if last_batch_crc is not None and crc != last_batch_crc:
        return None
    return crc, *fields


def _column(kind: str, chunk: bytes, crc: int) -> array[int] | None:
    column = array(kind)
    if len(chunk) % column.itemsize or crc32c.crc32c(chunk) != crc:
        return None
    column.frombytes(chunk)
    if sys.byteorder != "little":
        column.byteswap()
    return column


def _little_endian(column: array[int]) -> bytes:
    if sys.byteorder == "little":
        return column.tobytes()
    swapped = array(column.typecode, column)
    swapped.byteswap()
    return swapped.tobytes()
