"""Opening a queue's files and rebuilding its state from them (for `QueueShell.open`).

The log and the cursor log say which messages exist and which are settled;
the delivery mark says which unacked ones may have been delivered before
(they come back flagged redelivered). Non-persistent messages do not survive
a restart of a queue that lives on one node; in a replicated queue they are
copied like any other and survive a failover, as on RabbitMQ's mirrors.

A replicated queue's leader (`replica`) starts from the high watermark its
copy knew: the messages above it wait for the followers (`held`), and since
deliveries are not replicated, a node that did not lead this epoch before
flags every unacked message redelivered (AMQP's "may have been delivered"),
held ones too when they are released (the old leader's high watermark may
have been ahead of what this copy heard), and says so in its delivery mark
at once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from logbroker.queue.delivery_mark import DeliveryMark
from logbroker.queue.message_meta import MessageMeta
from logbroker.queue.queue_core import QueueCore
from logbroker.queue.queue_recovery import recovered_metas
from logbroker.queue.queue_settings import QueueSettings
from logbroker.queue.replica_setup import ReplicaSetup, open_gate
from logbroker.queue.replication_gate import ReplicationGate
from segments.cursor_log import CursorLog
from segments.filesystem import FileSystem
from segments.log import Log, LogConfig


@dataclass
class OpenedQueue:
    log: Log
    cursor: CursorLog
    mark: DeliveryMark
    core: QueueCore
    gate: ReplicationGate | None
    held: dict[int, MessageMeta]  # written, above the high watermark: not ready yet
    held_delivered_below: int  # held messages below it may have been delivered


def open_queue_files(settings: QueueSettings, fs: FileSystem, directory: str,
                     replica: ReplicaSetup | None, now_ms: int,
                     log_config: LogConfig | None = None) -> OpenedQueue:
    """`log_config`: the segment log's (None: the default; the simulation's is small)."""
    fs.makedirs(directory)
    log = Log.open(fs, os.path.join(directory, "log"), log_config)
    cursor = CursorLog.open(fs, os.path.join(directory, "cursor"))
    mark = DeliveryMark.open(fs, directory, log.next_offset)
    # Acks can reach the disk before the records they ack (transient messages are
    # delivered once written, not synced): none may outlive the log's end.
    cursor.forget_from(log.next_offset)
    ack_floor = max(cursor.ack_floor, log.log_start_offset)
    metas, transient = recovered_metas(fs, directory, log, ack_floor, settings,
                                       replicated=replica is not None)
    if transient and replica is None:
        cursor.append(transient)  # non-persistent messages do not survive a restart
        cursor.sync()
    ready_end, delivered_below, gate = log.next_offset, mark.persisted, None
    if replica is not None:
        try:
            gate, ready_end, reopened = open_gate(replica, fs, directory, log, cursor, now_ms)
        except BaseException:
            log.close()  # let go of the directory: the caller tries again later
            cursor.close()
            raise
        if reopened:
            delivered_below = min(mark.persisted, log.next_offset)
        else:
            delivered_below = log.next_offset
            # A crash before this leader delivers anything must not forget that its
            # predecessor may have delivered them.
            mark.raise_to(delivered_below)
    ready_end = max(ack_floor, ready_end)
    core = QueueCore.recover(
        settings.limits, ack_floor=ack_floor, next_offset=ready_end,
        acked=cursor.acked.ranges(),
        metas=metas if ready_end == log.next_offset else metas.sliced(0, ready_end - ack_floor),
        delivered_below=delivered_below, max_priority=settings.max_priority,
        single_active_consumer=settings.single_active_consumer, now_ms=now_ms,
    )
    held = {offset: metas[offset - ack_floor] for offset in range(ready_end, log.next_offset)}
    return OpenedQueue(log, cursor, mark, core, gate, held, delivered_below)
