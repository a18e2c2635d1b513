"""Reading a queue's state back after a restart: its delivery mark and message metadata.

The metadata of the messages past the ack floor (size, expiry, priority, and
which are non-persistent) comes from the meta sidecars of the sealed segments
(meta_sidecar.py), so a restart reads a few bytes a message instead of
decoding every one; only the active segment, and a sealed one whose sidecar
is missing or bad, is read message by message (and such a sidecar is written
again, so the next restart finds it).
"""

from __future__ import annotations

import json

from logbroker.queue.message_meta import MetaColumns
from logbroker.queue.meta_sidecar import (
    read_sidecar,
    remove_sidecars,
    sidecar_directory,
    sidecar_path,
    write_sidecar,
)
from logbroker.queue.queue_settings import QueueSettings
from logbroker.queue.segment_facts import SegmentFacts, batch_crc, scanned_facts
from segments.filesystem import FileSystem
from segments.log import Log


def read_delivery_mark(fs: FileSystem, path: str) -> int:
    if not fs.exists(path):
        return 0
    handle = fs.open(path)
    try:
        return int(json.loads(handle.read_at(0, handle.size()))["delivered_below"])
    except (ValueError, KeyError, TypeError):
        return 2**62  # unreadable: assume everything may have been delivered
    finally:
        handle.close()


def recovered_metas(
    fs: FileSystem, directory: str, log: Log, ack_floor: int, settings: QueueSettings,
    replicated: bool = False,
) -> tuple[MetaColumns, list[tuple[int, int]]]:
    """Metadata for every offset in [ack_floor, next_offset), and the transient ones.
    `directory` is the queue's (its sidecars are in `meta/` there). A `replicated`
    copy may have been cut back and written again since a sidecar was written: each
    sealed segment's last batch must be the one its sidecar names."""
    sidecars = sidecar_directory(directory)
    fs.makedirs(sidecars)
    summaries = log.segment_summaries()
    # Sidecars of segments gone (deleted, or cut back by a replica) must not linger.
    remove_sidecars(fs, sidecars, {base for base, *_ in summaries[:-1]})
    columns = MetaColumns.zeros(max(log.next_offset - ack_floor, 0))
    transient: list[tuple[int, int]] = []
    for index, (base, next_offset, size, _) in enumerate(summaries):
        if next_offset <= ack_floor or base == next_offset:
            continue
        if index == len(summaries) - 1:
            facts = scanned_facts(log, max(base, ack_floor), next_offset)
        else:
            facts = sealed_facts(fs, sidecars, log, base, next_offset, size,
                                 settings.message_ttl_ms is not None, replicated)
        start = max(ack_floor - facts.base_offset, 0)
        columns.put(facts.base_offset + start - ack_floor,
                    facts.meta_columns(settings.message_ttl_ms, start))
        transient.extend(facts.transient_ranges(ack_floor))
    if not settings.durable and log.next_offset > ack_floor:
        transient = [(ack_floor, log.next_offset)]  # nothing in it survives a restart
    return columns, transient


def sealed_facts(fs: FileSystem, sidecars: str, log: Log, base: int, next_offset: int,
                 size: int, with_timestamps: bool, check_last_batch: bool = False
                 ) -> SegmentFacts:
    """A sealed segment's facts: from its sidecar, else read from it (and the sidecar
    written for next time)."""
    path = sidecar_path(sidecars, base)
    last_crc = batch_crc(log.read_batches(next_offset - 1, 1)[0]) if check_last_batch \
        else None
    facts = read_sidecar(fs, path, base, next_offset, size, with_timestamps, last_crc)
    if facts is None:
        facts = scanned_facts(log, base, next_offset)
        write_sidecar(fs, path, facts, size)
    return facts
