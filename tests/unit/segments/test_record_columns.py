"""The record columns: the C encoder against the Python reference, and the fallbacks."""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
from typing import Any

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from segments import record_columns
from segments.record_batch import MAGIC, OFFSET, PREFIX, TAIL, RecordBatch
from segments.record_columns import (
    FLAG_HEADERS,
    FLAG_KEYS,
    FLAG_TIMESTAMPS,
    Headers,
    Record,
    decode_columns,
    encode_columns,
    encode_columns_python,
    encode_headers,
)

try:
    from segments import _record_columns
except ImportError:  # built on install only where a C compiler is there
    _record_columns = None  # type: ignore[assignment]

needs_c = pytest.mark.skipif(_record_columns is None, reason="C encoder not built (no compiler)")

headers_strategy = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)), max_size=3
).map(tuple)


@st.composite
def record_lists(draw: st.DrawFn) -> list[Record]:
    """Records that share header tuples the way a broker's do: some the same object,
    some equal but distinct, some different."""
    shared: Headers = draw(headers_strategy)
    records = []
    for _ in range(draw(st.integers(min_value=1, max_value=30))):
        choice = draw(st.sampled_from(["shared", "copy", "own", "none"]))
        headers = {"shared": shared, "copy": tuple(list(shared)), "none": ()}.get(choice)
        if headers is None:
            headers = draw(headers_strategy)
        records.append(Record(
            draw(st.binary(max_size=300)),
            draw(st.integers(min_value=-(2**63), max_value=2**63 - 1)),
            draw(st.none() | st.binary(max_size=20)),
            headers,
        ))
    return records


@needs_c
@given(record_lists())
def test_c_encoder_writes_the_reference_bytes(records: list[Record]) -> None:
    expected = encode_columns_python(records)
    assert _record_columns.encode(records, encode_headers) == tuple(expected)
    assert _record_columns.encode(tuple(records), encode_headers) == tuple(expected)


@given(record_lists())
def test_columns_decode_to_the_records(records: list[Record]) -> None:
    payload, flags, first_ts, max_ts = encode_columns(records)
    assert first_ts == records[0].timestamp_ms
    assert max_ts == max(record.timestamp_ms for record in records)
    assert bool(flags & FLAG_KEYS) == any(record.key is not None for record in records)
    assert bool(flags & FLAG_HEADERS) == any(record.headers for record in records)
    assert bool(flags & FLAG_TIMESTAMPS) == (len({r.timestamp_ms for r in records}) > 1)
    decoded = decode_columns(payload, 10, len(records), first_ts, flags)
    assert [(r.value, r.timestamp_ms, r.key, r.headers) for r in decoded] == [
        tuple(record) for record in records
    ]
    assert [r.offset for r in decoded] == list(range(10, 10 + len(records)))


def _odd(value: Any = b"v", timestamp: Any = 1, key: Any = None, headers: Any = ()) -> Any:
    return Record(value, timestamp, key, headers)


@needs_c
@pytest.mark.parametrize(
    "records",
    [
        [_odd(), _odd(value=bytearray(b"ba"))],  # bytes-like but not bytes
        [_odd(value=memoryview(b"mv"))],
        [_odd(key=bytearray(b"k"))],
        [_odd(timestamp=True)],  # an int subclass
        [_odd(headers=[("h", b"v")])],  # a list, not a tuple
        [_odd(), ("v", 1)],  # not a record of four
    ],
    ids=["bytearray", "memoryview", "bytearray-key", "bool-ts", "list-headers", "short"],
)
def test_c_encoder_leaves_other_shapes_to_the_reference(records: list[Any]) -> None:
    assert _record_columns.encode(records, encode_headers) is None


def test_bytes_like_values_encode_as_bytes() -> None:
    records: list[Any] = [Record(b"ab", 5), _odd(value=bytearray(b"cd")),
                          _odd(value=memoryview(b"e"))]
    expected = encode_columns_python([Record(b"ab", 5), Record(b"cd", 1), Record(b"e", 1)])
    assert encode_columns(records) == expected


@pytest.mark.parametrize(
    ("records", "error"),
    [
        ([_odd(timestamp=0), _odd(timestamp=2**63)], struct.error),
        ([_odd(timestamp=0), _odd(timestamp=1.5)], struct.error),
        ([_odd(value="text")], TypeError),
        ([_odd(headers=(("h", "not bytes"),))], TypeError),
        ([_odd(headers=(("x" * 70_000, None),))], struct.error),
    ],
    ids=["ts-overflow", "float-ts", "str-value", "str-header-value", "long-header-name"],
)
def test_bad_records_raise_the_reference_error(records: list[Any], error: type[Exception]
                                               ) -> None:
    with pytest.raises(error):
        encode_columns(records)
    with pytest.raises(error):
        encode_columns_python(records)


@needs_c
def test_c_encoder_passes_on_the_headers_encoders_errors() -> None:
    def failing(headers: Headers) -> bytes:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError, match="no"):
        _record_columns.encode([Record(b"v", 1, None, (("h", None),))], failing)
    with pytest.raises(TypeError, match="bytes"):
        _record_columns.encode([Record(b"v", 1, None, (("h", None),))], lambda h: "str")


@needs_c
def test_each_distinct_headers_tuple_is_encoded_once() -> None:
    calls: list[Headers] = []

    def counting(headers: Headers) -> bytes:
        calls.append(headers)
        return encode_headers(headers)

    one, other = (("a", b"1"),), (("b", None),)
    records = [Record(b"v", 1, None, h) for h in (one, other, one, tuple(list(one)), other)]
    _record_columns.encode(records, counting)
    assert calls == [one, other]


def test_pure_python_switch_and_encoder_name() -> None:
    code = "from segments.record_columns import ENCODER; print(ENCODER)"
    env = {**os.environ, "LOGBROKER_PURE_PYTHON": "1"}
    chosen = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, check=True).stdout.strip()
    assert chosen == "python"
    expected = "c" if _record_columns is not None else "python"
    assert expected == record_columns.ENCODER


def _reference_batch(base_offset: int, records: list[Record]) -> tuple[bytes, bytes]:
    """Header and payload as the Python path makes them (crc32c package for the CRC)."""
    payload, flags, first_ts, max_ts = encode_columns_python(records)
    tail = TAIL.pack(MAGIC, flags, len(records), first_ts, max_ts)
    crc = crc32c.crc32c(payload, crc32c.crc32c(OFFSET.pack(base_offset) + tail))
    return PREFIX.pack(base_offset, 4 + len(tail) + len(payload), crc) + tail, payload


def _c_batch(records: list[Record], base_offset: int) -> tuple[bytes, bytes, int, int] | None:
    return _record_columns.encode_batch(records, encode_headers, base_offset)


needs_c_crc = pytest.mark.skipif(
    _record_columns is None or _record_columns.encode_batch([Record(b"x", 1)], encode_headers,
                                                            0) is None,
    reason="C encoder not built, or no CRC-32C instruction")


@needs_c_crc
@given(record_lists(), st.integers(min_value=0, max_value=2**62))
def test_c_batch_with_its_crc_is_the_reference_batch(records: list[Record], base_offset: int
                                                     ) -> None:
    made = _c_batch(records, base_offset)
    assert made is not None
    head, payload, first_ts, max_ts = made
    assert (head, payload) == _reference_batch(base_offset, records)
    assert (first_ts, max_ts) == (records[0].timestamp_ms, max(r.timestamp_ms for r in records))


@needs_c_crc
@pytest.mark.parametrize("sizes", [[0], [1], [2], [0, 0, 1], [7, 9, 1023, 1024, 1025],
                                   [1024] * 100, [3, 5000, 0, 17, 65536, 8, 9]])
def test_c_batch_crc_over_awkward_lengths(sizes: list[int]) -> None:
    """Thirds of the payload that start and end inside values, values shorter than
    a word, empty ones: the three CRC streams and their combination."""
    rng = random.Random(len(sizes) * 7919 + sum(sizes))
    records = [Record(rng.randbytes(size), 1000 + index) for index, size in enumerate(sizes)]
    made = _c_batch(records, 77)
    assert made is not None
    assert (made[0], made[1]) == _reference_batch(77, records)
    assert RecordBatch(made[0] + made[1]).records()[-1].value == records[-1].value


@needs_c_crc
def test_c_batch_leaves_negative_offsets_and_other_shapes_to_python() -> None:
    assert _c_batch([Record(b"x", 1)], -1) is None
    assert _c_batch([_odd(value=bytearray(b"x"))], 0) is None
