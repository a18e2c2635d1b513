import pytest
from hypothesis import given
from hypothesis import strategies as st

from segments.record_batch import (
    HEADER_SIZE,
    BatchFormatError,
    Compression,
    Record,
    RecordBatch,
    batch_size_from_prefix,
    encode_batch,
)

records_strategy = st.lists(
    st.builds(
        Record,
        value=st.binary(max_size=300),
        timestamp_ms=st.integers(min_value=0, max_value=2**40),
        key=st.none() | st.binary(max_size=20),
        headers=st.lists(
            st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)), max_size=3
        ).map(tuple),
    ),
    min_size=1,
    max_size=20,
)


@given(records_strategy, st.integers(min_value=0, max_value=2**50), st.sampled_from(Compression))
def test_round_trip_keeps_every_field(
    records: list[Record], base_offset: int, compression: Compression
) -> None:
    data = encode_batch(base_offset, records, compression)
    batch = RecordBatch(data)
    assert batch.base_offset == base_offset
    assert batch.record_count == len(records)
    assert batch.next_offset == base_offset + len(records)
    assert batch.first_timestamp_ms == records[0].timestamp_ms
    assert batch.max_timestamp_ms == max(r.timestamp_ms for r in records)
    decoded = batch.records()
    assert [r.offset for r in decoded] == list(range(base_offset, base_offset + len(records)))
    for original, read in zip(records, decoded, strict=True):
        assert read.value == original.value
        assert read.key == original.key
        assert read.headers == original.headers
        assert read.timestamp_ms == original.timestamp_ms
    assert batch_size_from_prefix(data[:16]) == (base_offset, len(data))


def test_zstd_shrinks_repetitive_payloads() -> None:
    records = [Record(b"a" * 1000, 5) for _ in range(50)]
    plain = encode_batch(0, records)
    packed = encode_batch(0, records, Compression.ZSTD)
    assert len(packed) < len(plain) // 10
    assert RecordBatch(packed).records()[49].value == b"a" * 1000


@pytest.mark.parametrize("position", [0, 5, 12, 20, HEADER_SIZE + 3, -1])
def test_any_flipped_byte_is_detected(position: int) -> None:
    data = bytearray(encode_batch(7, [Record(b"hello", 1), Record(b"world", 2)]))
    data[position] ^= 0x40
    with pytest.raises(BatchFormatError):
        RecordBatch(bytes(data)).records()


def test_truncated_batch_is_rejected() -> None:
    data = encode_batch(0, [Record(b"hello", 1)])
    with pytest.raises(BatchFormatError, match="length"):
        RecordBatch(data[:-1])


def test_empty_batch_cannot_be_encoded() -> None:
    with pytest.raises(ValueError):
        encode_batch(0, [])
