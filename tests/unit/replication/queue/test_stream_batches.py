"""stream_batches: the leader's batches as stored, durable ones only, bounded."""

from __future__ import annotations

from replication.queue.stream_batches import stream_batches
from segments.log import Log
from segments.memory_filesystem import MemoryFileSystem
from segments.record_batch import Record, RecordBatch


def log_with_batches(*sizes: int) -> Log:
    log = Log.open(MemoryFileSystem(), "/log")
    for size in sizes:
        log.append([Record(f"m{log.next_offset + i}".encode(), 0) for i in range(size)])
    return log


def offsets(blobs: list[bytes]) -> list[tuple[int, int]]:
    return [(RecordBatch(b).base_offset, RecordBatch(b).next_offset) for b in blobs]


def test_whole_batches_up_to_the_durable_end() -> None:
    log = log_with_batches(3, 3, 3)
    assert offsets(stream_batches(log, 0, 9, 1 << 20, 100)) == [(0, 3), (3, 6), (6, 9)]
    assert offsets(stream_batches(log, 0, 6, 1 << 20, 100)) == [(0, 3), (3, 6)]
    assert stream_batches(log, 6, 6, 1 << 20, 100) == []


def test_bounded_by_records() -> None:
    log = log_with_batches(3, 3, 3)
    assert offsets(stream_batches(log, 0, 9, 1 << 20, 4)) == [(0, 3), (3, 6)]


def test_a_batch_cut_inside_is_sent_re_encoded_from_the_offset() -> None:
    log = log_with_batches(4)
    blobs = stream_batches(log, 2, 4, 1 << 20, 100)
    assert offsets(blobs) == [(2, 4)]
    assert [r.value for r in RecordBatch(blobs[0]).records()] == [b"m2", b"m3"]
