"""Reading a queue's state back after a restart: its delivery mark and message metadata."""

from __future__ import annotations

import json

from logbroker.message import Message
from logbroker.queue.message_meta import MessageMeta, meta_of
from logbroker.queue.queue_settings import QueueSettings
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
    log: Log, ack_floor: int, settings: QueueSettings
) -> tuple[list[MessageMeta], list[tuple[int, int]]]:
    """Metadata for every offset in [ack_floor, next_offset), and the transient ones."""
    metas: list[MessageMeta] = []
    transient: list[tuple[int, int]] = []
    offset = ack_floor
    while offset < log.next_offset:
        records = log.read(offset, 1 << 20)
        for record in records:
            message = Message.from_record(record)
            metas.append(meta_of(message, settings.message_ttl_ms, record.timestamp_ms))
            if not message.persistent or not settings.durable:
                transient.append((record.offset, record.offset + 1))
        offset = records[-1].offset + 1
    return metas, transient
