"""Which replica the controller promotes when a queue's leader node is gone (pure).

The seeds' rule: the in-sync follower with the highest persisted offset,
ties broken by the longest running node, then by name (so the choice is
deterministic). Only with `promote_out_of_sync` (RabbitMQ's
`ha-promote-on-failure: always`) may an out-of-sync replica be chosen when
no in-sync one answers, the one holding the most (latest epoch, then log
end); the caller logs and counts that. No candidate: the queue stays
unavailable until one returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    """What a live replica reports about its copy of the queue."""

    node: str
    log_end: int
    last_epoch: int
    started_ms: int  # when the node's process started: smaller is longer running


@dataclass(frozen=True, slots=True)
class Promotion:
    leader: str
    in_sync: tuple[str, ...]  # leader first
    out_of_sync: bool


def choose_leader(old_leader: str, in_sync: Sequence[str], statuses: Sequence[ReplicaStatus],
                  promote_out_of_sync: bool) -> Promotion | None:
    """The new leader among the replicas that answered (`statuses`), or None."""
    answered = [s for s in statuses if s.node != old_leader]
    synced = [s for s in answered if s.node in in_sync]
    if synced:
        best = min(synced, key=lambda s: (-s.log_end, s.started_ms, s.node))
        others = tuple(s.node for s in sorted(synced, key=lambda s: s.node) if s is not best)
        return Promotion(best.node, (best.node, *others), out_of_sync=False)
    if promote_out_of_sync and answered:
        best = min(answered, key=lambda s: (-s.last_epoch, -s.log_end, s.started_ms, s.node))
        return Promotion(best.node, (best.node,), out_of_sync=True)
    return None
