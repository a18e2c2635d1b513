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

The payload stores the records column by column, so encoding is a handful of
C-level array operations instead of a Python loop per record:

    value_length      u32 x count
    timestamp_ms      i64 x count   (if flagged; else every record has first_timestamp_ms)
    key_length        i32 x count   (if flagged; -1: no key)
    headers_length    u32 x count   (if flagged; bytes of the record's encoded headers)
    keys, encoded headers, values   (each concatenated in record order)
    a header: key_length u16, key (UTF-8), value_length i32 (-1: none), value

Offsets are dense: record i of a batch has offset base_offset + i, so the
offset delta is the record's position. The first 16 bytes are enough to skip
a batch, which is what index rebuilding and recovery scans rely on. The CRC
covers the base offset too (unlike Kafka's), so a damaged offset cannot
relabel records.
"""

from __future__ import annotations

import functools
import struct
import sys
from array import array
from collections.abc import Sequence
from enum import IntEnum
from typing import NamedTuple

import crc32c
import zstandard

MAGIC = 2
PREFIX = struct.Struct("<qII")  # base_offset, batch_length, crc
OFFSET = struct.Struct("<q")
TAIL = struct.Struct("<BHIqq")  # magic, flags, record_count, first_ts, max_ts
PREFIX_SIZE = PREFIX.size  # bytes needed to learn where the batch ends
HEADER_SIZE = PREFIX.size + TAIL.size
HEADER_KEY = struct.Struct("<H")
HEADER_VALUE = struct.Struct("<i")
COMPRESSION_MASK = 0x3
FLAG_TIMESTAMPS = 0x4
FLAG_KEYS = 0x8
FLAG_HEADERS = 0x10
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


class EncodedBatch(NamedTuple):
    """A batch ready to write: `head` and `payload` go to the file back to back."""

    head: bytes
    payload: bytes
    base_offset: int
    record_count: int
    first_timestamp_ms: int
    max_timestamp_ms: int

    @property
    def size(self) -> int:
        return len(self.head) + len(self.payload)


@functools.lru_cache(maxsize=256)
def _header_name(name: str) -> bytes:
    """A header name as stored: length, then UTF-8 (a broker uses a handful of names)."""
    encoded = name.encode()
    return HEADER_KEY.pack(len(encoded)) + encoded


def _encode_headers(headers: Headers) -> bytes:
    parts: list[bytes] = []
    for name, value in headers:
        parts.append(_header_name(name))
        if value is None:
            parts.append(HEADER_VALUE.pack(-1))
        else:
            parts.append(HEADER_VALUE.pack(len(value)))
            parts.append(value)
    return b"".join(parts)


def encode_batch_parts(
    base_offset: int, records: Sequence[Record], compression: Compression = Compression.NONE
) -> EncodedBatch:
    """Encode `records` as one batch whose first record gets `base_offset`."""
    if not records:
        raise ValueError("a batch holds at least one record")
    values, timestamps, keys, headers = zip(*records, strict=True)
    first_timestamp_ms = timestamps[0]
    max_timestamp_ms = max(timestamps)
    flags = int(compression)
    parts: list[bytes] = [array("I", map(len, values)).tobytes()]
    if timestamps.count(first_timestamp_ms) != len(timestamps):
        flags |= FLAG_TIMESTAMPS
        parts.append(struct.pack(f"<{len(timestamps)}q", *timestamps))
    has_keys = keys.count(None) != len(keys)
    if has_keys:
        flags |= FLAG_KEYS
        parts.append(array("i", [-1 if k is None else len(k) for k in keys]).tobytes())
    encoded_headers: list[bytes] = []
    if any(headers):
        flags |= FLAG_HEADERS
        # A batch's records mostly carry equal headers (a broker's exchange, routing
        # key and properties): each distinct set is encoded once.
        distinct: dict[Headers, bytes] = {}
        for h in headers:
            if not h:
                encoded_headers.append(b"")
                continue
            encoded = distinct.get(h)
            if encoded is None:
                encoded = distinct[h] = _encode_headers(h)
            encoded_headers.append(encoded)
        parts.append(array("I", map(len, encoded_headers)).tobytes())
    if has_keys:
        parts.extend(k for k in keys if k)
    parts.extend(encoded_headers)
    parts.extend(values)
    payload = b"".join(parts)
    if compression is Compression.ZSTD:
        payload = _compressor.compress(payload)
    tail = TAIL.pack(MAGIC, flags, len(records), first_timestamp_ms, max_timestamp_ms)
    crc = crc32c.crc32c(payload, crc32c.crc32c(tail, crc32c.crc32c(OFFSET.pack(base_offset))))
    head = PREFIX.pack(base_offset, 4 + len(tail) + len(payload), crc) + tail
    return EncodedBatch(head, payload, base_offset, len(records), first_timestamp_ms,
                        max_timestamp_ms)


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
                                   self.first_timestamp_ms, self.flags)
        except (struct.error, UnicodeDecodeError) as error:
            raise BatchFormatError(f"record framing: {error}") from error


def _column(kind: str, buffer: bytes, position: int, count: int) -> tuple[array[int], int]:
    column = array(kind)
    end = position + column.itemsize * count
    if end > len(buffer):
        raise BatchFormatError("record columns run past the payload")
    column.frombytes(buffer[position:end])
    if sys.byteorder != "little":
        column.byteswap()
    return column, end


def _decode_records(
    payload: bytes | memoryview, base_offset: int, count: int, first_timestamp_ms: int,
    flags: int,
) -> list[LogRecord]:
    buffer = bytes(payload)
    value_lengths, position = _column("I", buffer, 0, count)
    timestamps: Sequence[int] = [first_timestamp_ms] * count
    if flags & FLAG_TIMESTAMPS:
        timestamps, position = _column("q", buffer, position, count)
    keys: list[bytes | None] = [None] * count
    if flags & FLAG_KEYS:
        key_lengths, position = _column("i", buffer, position, count)
    header_lists: list[Headers] = [()] * count
    if flags & FLAG_HEADERS:
        header_lengths, position = _column("I", buffer, position, count)
    if flags & FLAG_KEYS:
        for index, length in enumerate(key_lengths):
            if length >= 0:
                keys[index] = buffer[position : position + length]
                position += length
    if flags & FLAG_HEADERS:
        # Records of one batch usually share their headers (same exchange, routing key,
        # properties): decode each distinct encoding once.
        decoded: dict[bytes, Headers] = {}
        for index, length in enumerate(header_lengths):
            if length:
                encoded = buffer[position : position + length]
                headers = decoded.get(encoded)
                if headers is None:
                    headers = decoded[encoded] = _decode_headers(encoded)
                header_lists[index] = headers
                position += length
    if position + sum(value_lengths) != len(buffer):
        raise BatchFormatError("record lengths do not add up to the payload size")
    records: list[LogRecord] = []
    for index, length in enumerate(value_lengths):
        records.append(LogRecord(base_offset + index, timestamps[index], keys[index],
                                 buffer[position : position + length], header_lists[index]))
        position += length
    return records


def _decode_headers(buffer: bytes) -> Headers:
    headers: list[tuple[str, bytes | None]] = []
    position = 0
    while position < len(buffer):
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
    if position != len(buffer):
        raise BatchFormatError("a record's headers run past their length")
    return tuple(headers)
