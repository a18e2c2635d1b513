"""Turning the appends of a group into as few batches as possible.

Many small appends (one per publisher, say) written together cost one
encoding and one index entry when they share a batch, so a group is merged
into batches of about MERGED_BATCH_BYTES of values. Each append still learns
its own offsets, `[base_offset, next_offset)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate, chain, pairwise
from operator import itemgetter

from segments.log_config import AppendResult
from segments.record_batch import Compression, EncodedBatch, Record, encode_batch_parts

MERGED_BATCH_BYTES = 1 << 20
_value_of = itemgetter(0)
_new_tuple = tuple.__new__


def encode_groups(
    groups: Sequence[Sequence[Record]], next_offset: int, compression: Compression
) -> tuple[list[EncodedBatch], list[AppendResult]]:
    """Batches for `groups` starting at `next_offset`, and each group's offsets."""
    ends = list(accumulate(map(len, groups), initial=next_offset))
    # tuple.__new__ rather than AppendResult(...): a NamedTuple's __new__ is Python
    # code, and this makes one result per append (a third of the cost, 64 appends).
    results = [_new_tuple(AppendResult, pair) for pair in pairwise(ends)]
    if ends[-1] == next_offset:
        return [], results
    merged = groups[0] if len(groups) == 1 else list(chain.from_iterable(groups))
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
