"""The record batch: the unit in which records are written, checksummed and read.

On-disk layout (little-endian), one batch after another in a segment file:

    base_offset        i64   offset of the first record
    batch_length       u32   bytes that follow this field
    crc                u32   CRC32C of base_offset and of every byte after this field
    magic              u8    format version (2)
    flags              u16   bits 0-1: compression (0 none, 1 zstd);
                             bit 2: timestamps present; bit 3: keys present;
                             bit 4: headers present
    record_count       u32
    first_timestamp_ms i64   timestamp of the first record
    max_timestamp_ms   i64   largest record timestamp in the batch
    payload                  the records, zstd-compressed as a whole if flagged

The payload holds the records column by column (see `record_columns`).

Offsets are dense: record i of a batch has offset base_offset + i, so the
offset delta is the record's position. The first 16 bytes are enough to skip
a batch, which is what index rebuilding and recovery scans rely on. The CRC
covers the base offset too (unlike Kafka's), so a damaged offset cannot
relabel records.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from enum import IntEnum
from typing import NamedTuple

import crc32c
import zstandard

from segments.record_columns import BatchFormatError as BatchFormatError
from segments.record_columns import (
    ColumnSummary,
    decode_columns,
    encode_batch_c,
    encode_columns,
    summarize_columns,
)
from segments.record_columns import Headers as Headers
from segments.record_columns import LogRecord as LogRecord
from segments.record_columns import Record as Record

MAGIC = 2
PREFIX = struct.Struct("<qII")  # base_offset, batch_length, crc
OFFSET = struct.Struct("<q")
TAIL = struct.Struct("<BHIqq")  # magic, flags, record_count, first_ts, max_ts
PREFIX_SIZE = PREFIX.size  # bytes needed to learn where the batch ends
HEADER_SIZE = PREFIX.size + TAIL.size
COMPRESSION_MASK = 0x3
# A batch larger than this is taken as a damaged length field, not as data.
MAX_BATCH_BYTES = 1 << 30


class Compression(IntEnum):
    NONE = 0
    ZSTD = 1


_new_tuple = tuple.__new__
_compressor = zstandard.ZstdCompressor(level=3)
_decompressor = zstandard.ZstdDecompressor()


class EncodedBatch(NamedTuple):
    """A batch ready to write: `head` and `payload` go to the file back to back."""

    head: bytes
    payload: bytes
    base_offset: int
    record_count: int
    first_timestamp_ms: int
    max_timestamp_ms: int
    size: int  # len(head) + len(payload)


def encode_batch_parts(
    base_offset: int, records: Sequence[Record], compression: Compression = Compression.NONE
) -> EncodedBatch:
    """Encode `records` as one batch whose first record gets `base_offset`."""
    if not records:
        raise ValueError("a batch holds at least one record")
    if compression is Compression.NONE:
        made = encode_batch_c(records, base_offset)
        if made is not None:
            head, payload, first_ts, max_ts = made
            return _encoded(head, payload, base_offset, len(records), first_ts, max_ts)
    payload, flags, first_timestamp_ms, max_timestamp_ms = encode_columns(records)
    flags |= int(compression)
    if compression is Compression.ZSTD:
        payload = _compressor.compress(payload)
    tail = TAIL.pack(MAGIC, flags, len(records), first_timestamp_ms, max_timestamp_ms)
    crc = crc32c.crc32c(payload, crc32c.crc32c(OFFSET.pack(base_offset) + tail))
    head = PREFIX.pack(base_offset, 4 + len(tail) + len(payload), crc) + tail
    return _encoded(head, payload, base_offset, len(records), first_timestamp_ms,
                    max_timestamp_ms)


def _encoded(head: bytes, payload: bytes, base_offset: int, record_count: int,
             first_timestamp_ms: int, max_timestamp_ms: int) -> EncodedBatch:
    # tuple.__new__: a NamedTuple's own __new__ is Python code, and this is per append.
    return _new_tuple(EncodedBatch, (head, payload, base_offset, record_count,
                                     first_timestamp_ms, max_timestamp_ms,
                                     len(head) + len(payload)))


def encode_batch(
    base_offset: int, records: Sequence[Record], compression: Compression = Compression.NONE
) -> bytes:
    """The batch as one bytes object (see `encode_batch_parts` to avoid the copy)."""
    encoded = encode_batch_parts(base_offset, records, compression)
    return encoded.head + encoded.payload


def batch_size_from_prefix(prefix: bytes | memoryview) -> tuple[int, int]:
    """(base_offset, total batch size in bytes) from the first PREFIX_SIZE bytes."""
    base_offset, batch_length, _ = PREFIX.unpack_from(prefix)
    return base_offset, PREFIX_SIZE - 4 + batch_length


class RecordBatch:
    """A validated batch: its header fields and its bytes; records decode on demand."""

    __slots__ = (
        "base_offset",
        "data",
        "first_timestamp_ms",
        "flags",
        "max_timestamp_ms",
        "record_count",
    )

    def __init__(self, data: bytes) -> None:
        """Parse and validate `data`, exactly one batch. Raises BatchFormatError."""
        if len(data) < HEADER_SIZE:
            raise BatchFormatError(f"batch of {len(data)} bytes is shorter than its header")
        base_offset, batch_length, crc = PREFIX.unpack_from(data)
        if PREFIX_SIZE - 4 + batch_length != len(data):
            raise BatchFormatError(
                f"length field says {PREFIX_SIZE - 4 + batch_length} bytes, have {len(data)}"
            )
        view = memoryview(data)
        if crc32c.crc32c(view[PREFIX_SIZE:], crc32c.crc32c(view[: OFFSET.size])) != crc:
            raise BatchFormatError("CRC32C mismatch")
        magic, flags, count, first_ts, max_ts = TAIL.unpack_from(data, PREFIX_SIZE)
        if magic != MAGIC:
            raise BatchFormatError(f"unknown magic byte {magic}")
        if count < 1 or base_offset < 0:
            raise BatchFormatError(f"bad header: base offset {base_offset}, count {count}")
        if flags & COMPRESSION_MASK not in (Compression.NONE, Compression.ZSTD):
            raise BatchFormatError(f"unknown compression {flags & COMPRESSION_MASK}")
        self.base_offset: int = base_offset
        self.record_count: int = count
        self.first_timestamp_ms: int = first_ts
        self.max_timestamp_ms: int = max_ts
        self.flags: int = flags
        self.data = data

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.record_count

    @property
    def size(self) -> int:
        return len(self.data)

    def _payload(self) -> bytes | memoryview:
        payload: bytes | memoryview = memoryview(self.data)[HEADER_SIZE:]
        if self.flags & COMPRESSION_MASK == Compression.ZSTD:
            try:
                payload = _decompressor.decompress(payload)
            except zstandard.ZstdError as error:
                raise BatchFormatError(f"zstd payload does not decompress: {error}") from error
        return payload

    def column_summary(self) -> ColumnSummary:
        """The records' value lengths, timestamps and headers, without copying values
        (a reader of their metadata only: a queue's restart)."""
        try:
            return summarize_columns(self._payload(), self.record_count, self.flags)
        except (struct.error, UnicodeDecodeError) as error:
            raise BatchFormatError(f"record framing: {error}") from error

    def records(self) -> list[LogRecord]:
        """Decode every record of the batch."""
        payload = self._payload()
        try:
            return decode_columns(payload, self.base_offset, self.record_count,
                                   self.first_timestamp_ms, self.flags)
        except (struct.error, UnicodeDecodeError) as error:
            raise BatchFormatError(f"record framing: {error}") from error
