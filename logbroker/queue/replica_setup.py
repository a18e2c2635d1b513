"""What a node needs to open a replicated queue as its leader, and the opening itself."""

from __future__ import annotations

from dataclasses import dataclass, field

from logbroker.queue.replication_gate import ReplicationGate
from replication.queue.epoch_history import EpochHistory
from replication.queue.replication_leader import ReplicationLeader, ReplicationLimits
from segments.cursor_log import CursorLog
from segments.filesystem import FileSystem
from segments.log import Log


class StaleEpochError(RuntimeError):
    """The metadata this node acted on is behind its own copy: it waits for more."""


@dataclass(frozen=True, slots=True)
class ReplicaSetup:
    node: str
    epoch: int
    members: tuple[str, ...]
    in_sync: tuple[str, ...]
    # What this replica last heard as a follower; None: unknown (then every unacked
    # message may have been delivered by an earlier leader).
    high_watermark: int | None = None
    sync_mode: str = "automatic"  # ha-sync-mode
    sync_batch_size: int = 4096  # ha-sync-batch-size: messages per fetch answer at most
    limits: ReplicationLimits = field(default_factory=ReplicationLimits)


def open_gate(setup: ReplicaSetup, fs: FileSystem, directory: str, log: Log,
              cursor: CursorLog, now_ms: int) -> tuple[ReplicationGate, int, bool]:
    """Start this node's epoch in the queue's epoch history; return the gate, the
    offset below which messages are ready at once, and whether this node led this
    epoch already (a restart, not a new leader).

    Everything below an acked offset was below the old leader's high watermark
    (only such messages are ever delivered), so it is confirmed: the starting
    high watermark is at least that. What lies above waits for the followers.
    """
    history = EpochHistory.load(fs, directory)
    history.truncate_from(log.next_offset + 1)
    if history.latest_epoch > setup.epoch:
        raise StaleEpochError(f"this copy holds epoch {history.latest_epoch}: it cannot "
                              f"lead epoch {setup.epoch}, which has ended")
    reopened = history.latest_epoch == setup.epoch
    if history.latest_epoch < setup.epoch:
        history.begin(setup.epoch, log.next_offset)
        history.save(fs, directory)
    acked_end = max([hi for _, hi in cursor.acked.ranges()[-1:]] + [cursor.ack_floor])
    start = min(log.next_offset,
                max(setup.high_watermark or 0, acked_end, log.log_start_offset))
    leader = ReplicationLeader(setup.node, setup.epoch, setup.members, setup.in_sync,
                               durable_end=log.next_offset, high_watermark=start,
                               now_ms=now_ms, limits=setup.limits, sync_mode=setup.sync_mode)
    leader.set_ack_floor(max(cursor.ack_floor, log.log_start_offset))
    gate = ReplicationGate(leader, history)
    gate.sync_batch_size = setup.sync_batch_size
    return gate, leader.high_watermark, reopened
