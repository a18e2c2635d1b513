"""The payload of a record batch: its records stored column by column.

    value_length      u32 x count
    timestamp_ms      i64 x count   (if FLAG_TIMESTAMPS; else every record has the
                                     batch's first_timestamp_ms)
    key_length        i32 x count   (if FLAG_KEYS; -1: no key)
    headers_length    u32 x count   (if FLAG_HEADERS; bytes of the record's encoded headers)
    keys, encoded headers, values   (each concatenated in record order)
    a header: key_length u16, key (UTF-8), value_length i32 (-1: none), value

All integers are little-endian. Columns make encoding a handful of C-level
array operations instead of a Python loop per record, and `_record_columns`
(a C extension built on install when a compiler is there) does it in one
pass: `encode_columns` uses it and falls back to `encode_columns_python`, the
reference, where it is missing, where LOGBROKER_PURE_PYTHON is set, or for
any record outside the shapes it takes (then the reference raises the errors).
The batch envelope around the payload (header, CRC, compression) is
`record_batch`'s; for an uncompressed batch the C extension can build that
too, checksumming while it copies (`encode_batch_c`, `_crc32c_copy.c`).
"""

from __future__ import annotations

import functools
import os
import struct
import sys
from array import array
from collections.abc import Callable, Sequence
from typing import NamedTuple

FLAG_TIMESTAMPS = 0x4
FLAG_KEYS = 0x8
FLAG_HEADERS = 0x10
HEADER_KEY = struct.Struct("<H")
HEADER_VALUE = struct.Struct("<i")

Headers = tuple[tuple[str, bytes | None], ...]


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


class RecordColumns(NamedTuple):
    """An encoded payload and what the batch header says about it."""

    payload: bytes
    flags: int  # FLAG_TIMESTAMPS | FLAG_KEYS | FLAG_HEADERS as they apply
    first_timestamp_ms: int
    max_timestamp_ms: int


@functools.lru_cache(maxsize=256)
def _header_name(name: str) -> bytes:
    """A header name as stored: length, then UTF-8 (a broker uses a handful of names)."""
    encoded = name.encode()
    return HEADER_KEY.pack(len(encoded)) + encoded


def encode_headers(headers: Headers) -> bytes:
    parts: list[bytes] = []
    for name, value in headers:
        parts.append(_header_name(name))
        if value is None:
            parts.append(HEADER_VALUE.pack(-1))
        else:
            parts.append(HEADER_VALUE.pack(len(value)))
            parts.append(value)
    return b"".join(parts)


def encode_columns_python(records: Sequence[Record]) -> RecordColumns:
    """The reference encoder (at least one record)."""
    values, timestamps, keys, headers = zip(*records, strict=True)
    first_timestamp_ms = timestamps[0]
    flags = 0
    parts: list[bytes] = [struct.pack(f"<{len(values)}I", *map(len, values))]
    if timestamps.count(first_timestamp_ms) != len(timestamps):
        flags |= FLAG_TIMESTAMPS
        parts.append(struct.pack(f"<{len(timestamps)}q", *timestamps))
    has_keys = keys.count(None) != len(keys)
    if has_keys:
        flags |= FLAG_KEYS
        parts.append(struct.pack(f"<{len(keys)}i", *[-1 if k is None else len(k) for k in keys]))
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
                encoded = distinct[h] = encode_headers(h)
            encoded_headers.append(encoded)
        parts.append(struct.pack(f"<{len(encoded_headers)}I", *map(len, encoded_headers)))
    if has_keys:
        parts.extend(k for k in keys if k)
    parts.extend(encoded_headers)
    parts.extend(values)
    return RecordColumns(b"".join(parts), flags, first_timestamp_ms, max(timestamps))


_CEncode = Callable[[Sequence[Record], Callable[[Headers], bytes]],
                    "tuple[bytes, int, int, int] | None"]
_CEncodeBatch = Callable[[Sequence[Record], Callable[[Headers], bytes], int],
                         "tuple[bytes, bytes, int, int] | None"]


def _load_c_encoders() -> tuple[_CEncode | None, _CEncodeBatch | None]:
    if os.environ.get("LOGBROKER_PURE_PYTHON"):
        return None, None
    try:
        from segments import _record_columns
    except ImportError:
        return None, None
    encode: _CEncode = _record_columns.encode
    encode_batch: _CEncodeBatch = _record_columns.encode_batch
    return encode, encode_batch


_c_encode, _c_encode_batch = _load_c_encoders()
ENCODER = "c" if _c_encode is not None else "python"


def encode_batch_c(records: Sequence[Record], base_offset: int
                   ) -> tuple[bytes, bytes, int, int] | None:
    """An uncompressed batch in one C pass, the CRC computed while the payload is
    copied (`_crc32c_copy.c`): (head, payload, first_ts, max_ts), or None where the
    C encoder is not built, the CPU lacks the CRC instruction, or a record is not of
    a shape it takes. The head is `record_batch`'s header, CRC included."""
    if _c_encode_batch is None:
        return None
    return _c_encode_batch(records, encode_headers, base_offset)


def encode_columns(records: Sequence[Record]) -> tuple[bytes, int, int, int]:
    """The payload for `records` (at least one), in C where it can be: the fields of
    a RecordColumns, as a plain tuple (this is per append)."""
    if _c_encode is not None:
        encoded = _c_encode(records, encode_headers)
        if encoded is not None:
            return encoded
    return encode_columns_python(records)


def _column(kind: str, buffer: bytes | memoryview, position: int, count: int
            ) -> tuple[array[int], int]:
    column = array(kind)
    end = position + column.itemsize * count
    if end > len(buffer):
        raise BatchFormatError("record columns run past the payload")
    column.frombytes(buffer[position:end])
    if sys.byteorder != "little":
        column.byteswap()
    return column, end


def _decode_header_lists(buffer: bytes | memoryview, position: int,
                         header_lengths: Sequence[int], header_lists: list[Headers]) -> int:
    """Fill `header_lists` from the headers column at `position`; the position after it.

    Records of one batch usually share their headers (same exchange, routing key,
    properties): each distinct encoding is decoded once."""
    decoded: dict[bytes, Headers] = {}
    for index, length in enumerate(header_lengths):
        if length:
            encoded = bytes(buffer[position : position + length])
            headers = decoded.get(encoded)
            if headers is None:
                headers = decoded[encoded] = _decode_headers(encoded)
            header_lists[index] = headers
            position += length
    return position


def decode_columns(
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
        position = _decode_header_lists(buffer, position, header_lengths, header_lists)
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


class ColumnSummary(NamedTuple):
    """A payload's records without their keys and values: what a reader that needs only
    their lengths, timestamps and headers gets without copying every value."""

    value_lengths: array[int]
    timestamps: array[int] | None  # None: every record has the batch's first timestamp
    headers: list[Headers]  # records of one batch with equal headers share one tuple


def summarize_columns(
    payload: bytes | memoryview, count: int, flags: int,
) -> ColumnSummary:
    """`decode_columns` without the keys and values (validated all the same)."""
    buffer = memoryview(payload)  # values are skipped, never copied
    value_lengths, position = _column("I", buffer, 0, count)
    timestamps = None
    if flags & FLAG_TIMESTAMPS:
        timestamps, position = _column("q", buffer, position, count)
    if flags & FLAG_KEYS:
        key_lengths, position = _column("i", buffer, position, count)
    header_lists: list[Headers] = [()] * count
    if flags & FLAG_HEADERS:
        header_lengths, position = _column("I", buffer, position, count)
    if flags & FLAG_KEYS:
        position += sum(length for length in key_lengths if length > 0)
    if flags & FLAG_HEADERS:
        first = header_lengths[0]
        encoded = bytes(buffer[position:position + first])
        if first and header_lengths.count(first) == count and \
                buffer[position:position + first * count] == encoded * count:
            # Every record carries the same headers (one publisher's batch): one
            # comparison in C instead of a loop over the records.
            header_lists = [_decode_headers(encoded)] * count
            header_lengths = array("I")
            position += first * count
        position = _decode_header_lists(buffer, position, header_lengths, header_lists)
    if position + sum(value_lengths) != len(buffer):
        raise BatchFormatError("record lengths do not add up to the payload size")
    return ColumnSummary(value_lengths, timestamps, header_lists)
