"""Turning the appends of a group into as few batches as possible.

Many small appends (one per publisher, say) written together cost one
encoding and one index entry when they share a batch, so a group is merged
into batches of about MERGED_BATCH_BYTES of values. Each append still learns
its own offsets, `[base_offset, next_offset)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from operator import itemgetter

from segments.log_config import AppendResult
from segments.record_batch import Compression, EncodedBatch, Record, encode_batch_parts

MERGED_BATCH_BYTES = 1 << 20
_value_of = itemgetter(0)


def encode_groups(
    groups: Sequence[Sequence[Record]], next_offset: int, compression: Compression
) -> tuple[list[EncodedBatch], list[AppendResult]]:
    """Batches for `groups` starting at `next_offset`, and each group's offsets."""
    offset = next_offset
    results: list[AppendResult] = []
    for records in groups:
        results.append(AppendResult(offset, offset + len(records)))
        offset += len(records)
    merged = list(chain.from_iterable(groups))
    if not merged:
        return [], results
    first = next_offset
    if len(groups) == 1 or sum(map(len, map(_value_of, merged))) <= MERGED_BATCH_BYTES:
        return [encode_batch_parts(first, merged, compression)], results
    batches: list[EncodedBatch] = []
    pending: list[Record] = []
    pending_bytes = 0
    for record in merged:
        pending.append(record)
        pending_bytes += len(record.value)
        if pending_bytes >= MERGED_BATCH_BYTES:
            batches.append(encode_batch_parts(first, pending, compression))
            first += len(pending)
            pending, pending_bytes = [], 0
    if pending:
        batches.append(encode_batch_parts(first, pending, compression))
    return batches, results
