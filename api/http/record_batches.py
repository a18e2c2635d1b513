"""Reading the binary replay format: concatenated record batches, as the log stores them.

Each batch carries its CRC32C, checked here, so a replay through the network is
verified end to end. Records outside [from_offset, next_offset) (the ends of
the first and last batch) are dropped.
"""

from __future__ import annotations

from collections.abc import Iterator

from segments.record_batch import (
    PREFIX_SIZE,
    LogRecord,
    RecordBatch,
    batch_size_from_prefix,
)


def records_in(data: bytes, from_offset: int, next_offset: int) -> Iterator[LogRecord]:
    position = 0
    while position < len(data):
        if len(data) - position < PREFIX_SIZE:
            raise ValueError("a record batch is cut short")
        _, size = batch_size_from_prefix(memoryview(data)[position:position + PREFIX_SIZE])
        batch = RecordBatch(data[position:position + size])
        position += size
        for record in batch.records():
            if from_offset <= record.offset < next_offset:
                yield record
