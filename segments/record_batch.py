"""The record batch: the unit in which records are written, checksummed and read.

On-disk layout (little-endian), one batch after another in a segment file:

    base_offset        i64   offset of the first record
    batch_length       u32   bytes that follow this field
    crc                u32   CRC32C of base_offset and of every byte after this field
    magic              u8    format version (1)
    flags              u16   bits 0-1: compression (0 none, 1 zstd)
    record_count       u32
    first_timestamp_ms i64   timestamp of the first record
    max_timestamp_ms   i64   largest record timestamp in the batch
    payload                  the records, zstd-compressed as a whole if flagged

and each record inside the payload:

    offset_delta u32, timestamp_delta i64, key_length i32 (-1: no key),
    header_count u16, value_length u32, key, headers, value
    a header: key_length u16, key (UTF-8), value_length i32 (-1: none), value

Offsets are dense: record i of a batch has offset base_offset + i, and
`offset_delta` must equal i. The first 16 bytes are enough to skip a batch,
which is what index rebuilding and recovery scans rely on. The CRC covers the
base offset too (unlike Kafka's), so a damaged offset cannot relabel records.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from enum import IntEnum
from typing import NamedTuple

import crc32c
import zstandard

MAGIC = 1
PREFIX = struct.Struct("<qII")  # base_offset, batch_length, crc
OFFSET = struct.Struct("<q")
TAIL = struct.Struct("<BHIqq")  # magic, flags, record_count, first_ts, max_ts
PREFIX_SIZE = PREFIX.size  # bytes needed to learn where the batch ends
HEADER_SIZE = PREFIX.size + TAIL.size
RECORD_HEADER = struct.Struct("<IqiHI")
HEADER_KEY = struct.Struct("<H")
HEADER_VALUE = struct.Struct("<i")
COMPRESSION_MASK = 0x3
# A batch larger than this is taken as a damaged length field, not as data.
MAX_BATCH_BYTES = 1 << 30

Headers = tuple[tuple[str, bytes | None], ...]


class Compression(IntEnum):
    NONE = 0
    ZSTD = 1


class Record(NamedTuple):
    """A record to append: the log assigns its offset."""

    value: bytes
    timestamp_ms: int
    key: bytes | None = None
    headers: Headers = ()


class LogRecord(NamedTuple):
    """A record read back from the log."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes
    headers: Headers


class BatchFormatError(ValueError):
    """The bytes are not a valid batch; `reason` says why."""


_compressor = zstandard.ZstdCompressor(level=3)
_decompressor = zstandard.ZstdDecompressor()


def _encode_headers(headers: Headers) -> bytes:
    parts: list[bytes] = []
    for name, value in headers:
        encoded_name = name.encode()
        parts.append(HEADER_KEY.pack(len(encoded_name)))
        parts.append(encoded_name)
        if value is None:
            parts.append(HEADER_VALUE.pack(-1))
        else:
            parts.append(HEADER_VALUE.pack(len(value)))
            parts.append(value)
    return b"".join(parts)


def encode_batch(
    base_offset: int, records: Sequence[Record], compression: Compression = Compression.NONE
) -> bytes:
    """Encode `records` as one batch whose first record gets `base_offset`."""
    if not records:
        raise ValueError("a batch holds at least one record")
    first_timestamp_ms = records[0].timestamp_ms
    max_timestamp_ms = first_timestamp_ms
    parts: list[bytes] = []
    append = parts.append
    pack = RECORD_HEADER.pack
    for delta, (value, timestamp_ms, key, headers) in enumerate(records):
        if timestamp_ms > max_timestamp_ms:
            max_timestamp_ms = timestamp_ms
        key_length = -1 if key is None else len(key)
        append(pack(delta, timestamp_ms - first_timestamp_ms, key_length, len(headers), len(value)))
        if key:
            append(key)
        if headers:
            append(_encode_headers(headers))
        append(value)
    payload = b"".join(parts)
    if compression is Compression.ZSTD:
        payload = _compressor.compress(payload)
    tail = TAIL.pack(MAGIC, int(compression), len(records), first_timestamp_ms, max_timestamp_ms)
    offset_bytes = OFFSET.pack(base_offset)
    crc = crc32c.crc32c(payload, crc32c.crc32c(tail, crc32c.crc32c(offset_bytes)))
    prefix = PREFIX.pack(base_offset, 4 + len(tail) + len(payload), crc)
    return b"".join((prefix, tail, payload))


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

    def records(self) -> list[LogRecord]:
        """Decode every record of the batch."""
        payload: bytes | memoryview = memoryview(self.data)[HEADER_SIZE:]
        if self.flags & COMPRESSION_MASK == Compression.ZSTD:
            try:
                payload = _decompressor.decompress(payload)
            except zstandard.ZstdError as error:
                raise BatchFormatError(f"zstd payload does not decompress: {error}") from error
        try:
            return _decode_records(payload, self.base_offset, self.record_count,
                                   self.first_timestamp_ms)
        except (struct.error, UnicodeDecodeError) as error:
            raise BatchFormatError(f"record framing: {error}") from error


def _decode_records(
    payload: bytes | memoryview, base_offset: int, count: int, first_timestamp_ms: int
) -> list[LogRecord]:
    buffer = bytes(payload)
    unpack = RECORD_HEADER.unpack_from
    header_size = RECORD_HEADER.size
    records: list[LogRecord] = []
    position = 0
    for index in range(count):
        delta, ts_delta, key_length, header_count, value_length = unpack(buffer, position)
        if delta != index:
            raise BatchFormatError(f"record {index} carries offset delta {delta}")
        position += header_size
        key = None
        if key_length >= 0:
            key = buffer[position : position + key_length]
            position += key_length
        headers: Headers = ()
        if header_count:
            headers, position = _decode_headers(buffer, position, header_count)
        value = buffer[position : position + value_length]
        position += value_length
        records.append(
            LogRecord(base_offset + index, first_timestamp_ms + ts_delta, key, value, headers)
        )
    if position != len(buffer):
        raise BatchFormatError(f"{len(buffer) - position} stray bytes after the last record")
    return records


def _decode_headers(buffer: bytes, position: int, count: int) -> tuple[Headers, int]:
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        (name_length,) = HEADER_KEY.unpack_from(buffer, position)
        position += HEADER_KEY.size
        name = buffer[position : position + name_length].decode()
        position += name_length
        (value_length,) = HEADER_VALUE.unpack_from(buffer, position)
        position += HEADER_VALUE.size
        value = None
        if value_length >= 0:
            value = buffer[position : position + value_length]
            position += value_length
        headers.append((name, value))
    return tuple(headers), position
