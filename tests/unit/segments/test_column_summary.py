"""`RecordBatch.column_summary`: what `records()` says, without the keys and values."""

import pytest

from segments.record_batch import BatchFormatError, Compression, RecordBatch, encode_batch
from segments.record_columns import Record

RECORDS = [
    Record(b"one", 5, None, (("p", b"\x01"),)),
    Record(b"", 7, b"key", ()),
    Record(b"three", 7, None, (("p", b"\x01"),)),
    Record(b"four!", 9, b"", (("a", None), ("p", b"\x02"))),
]


SAME_LENGTH = [Record(b"a", 1, None, (("p", b"\x01"),)), Record(b"b", 1, None, (("p", b"\x02"),))]


@pytest.mark.parametrize("compression", list(Compression))
@pytest.mark.parametrize("records", [RECORDS, RECORDS[:1], [RECORDS[0]] * 3, SAME_LENGTH,
                                     SAME_LENGTH[:1] * 2 + SAME_LENGTH[1:]])
def test_summary_matches_the_decoded_records(compression: Compression,
                                             records: list[Record]) -> None:
    batch = RecordBatch(encode_batch(40, records, compression))
    summary = batch.column_summary()
    decoded = batch.records()
    assert list(summary.value_lengths) == [len(r.value) for r in decoded]
    timestamps = (list(summary.timestamps) if summary.timestamps is not None
                  else [batch.first_timestamp_ms] * len(decoded))
    assert timestamps == [r.timestamp_ms for r in decoded]
    assert summary.headers == [r.headers for r in decoded]


def test_a_payload_whose_lengths_do_not_add_up_is_refused() -> None:
    batch = RecordBatch(encode_batch(0, RECORDS))
    batch.data = batch.data[:-1]  # past the CRC check: the framing itself must notice
    with pytest.raises(BatchFormatError):
        batch.column_summary()
