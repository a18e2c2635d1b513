"""What a leader sends a follower from its log: `stream_batches` (pure over a `Log`)."""

from __future__ import annotations

from segments.log import Log
from segments.record_batch import Compression, Record, encode_batch_parts


def stream_batches(log: Log, next_offset: int, durable_end: int, max_bytes: int,
                   max_records: int) -> list[bytes]:
    """The log's batches from `next_offset`, as stored, stopping at `durable_end` (only
    durable records: a leader that crashes and reopens the same epoch must not have
    handed out records it then writes differently), `max_bytes` or `max_records`.

    A batch that starts before `next_offset` (the follower cut inside one of this log's
    batches) is sent re-encoded from `next_offset` on.
    """
    blobs: list[bytes] = []
    if next_offset >= durable_end:
        return blobs
    records = 0
    for batch in log.read_batches(next_offset, max_bytes):
        if records >= max_records or batch.base_offset >= durable_end:
            break
        records += batch.record_count
        if batch.base_offset >= next_offset:
            blobs.append(batch.data)
            continue
        kept = [Record(r.value, r.timestamp_ms, r.key, r.headers)
                for r in batch.records() if r.offset >= next_offset]
        if kept:
            encoded = encode_batch_parts(next_offset, kept, Compression(batch.flags & 0x3))
            blobs.append(encoded.head + encoded.payload)
    return blobs
