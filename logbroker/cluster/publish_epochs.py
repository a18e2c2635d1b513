"""Whether a node may append a forwarded publish to a replicated queue it has open.

The sending node names, per replicated target queue, the leader epoch its metadata
has (`e` in `q.publish`: the epoch whose leader it meant). The receiving node has
caught up to the sender's metadata first (`QueueHost`), so its own record is at
least as new. It appends only while it leads, by its metadata, the very epoch its
queue shell (the `ReplicationGate`) serves, and that epoch is not older than the
sender's: otherwise it is a deposed leader whose shell has not closed yet, and an
append there would be confirmed by nobody or cut by the next leader. Refused
messages are nacked; the publisher retries at the new leader.

A newer epoch here than the sender's is fine: this node was elected again since
(the sender's metadata is behind), and it is the leader now.

Pure: no I/O.
"""

from __future__ import annotations

from logbroker.metadata.records import QueueRecord


def refusal(believed: int | None, gate_epoch: int | None, record: QueueRecord | None,
            own_node: str) -> str | None:
    """Why this node must not append a publish meant for the leader of epoch `believed`
    (None: it may). `gate_epoch`: the epoch the open shell leads (None: not replicated
    here); `record`: this node's metadata for the queue."""
    if believed is None:
        return None  # a sender on older code, or a queue it knows as not replicated
    if gate_epoch is None:
        return f"the sender knows epoch {believed}; the queue is not replicated here"
    if gate_epoch < believed:
        return f"this node leads epoch {gate_epoch}; the sender knows epoch {believed}"
    if record is None:
        return "the queue is gone from the metadata"
    if record.leader_node != own_node or record.epoch != gate_epoch:
        return (f"the metadata names {record.leader_node} leader of epoch {record.epoch}; "
                f"this node leads epoch {gate_epoch}")
    return None
