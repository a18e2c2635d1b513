"""`ReplicaMover`: the controller keeps queues' replica sets in line with their policies
(pure).

Theory of operation. On every controller check, for each queue with a leader
node, the replica spec its policy and arguments give
(`queue_placement.replica_count_or_nodes`) is compared with its record and
the next step (`replica_moves.next_step`) is taken: adding or dropping
members is a `SetQueuePlacement` for the same leader (a new member follows
and copies the queue; a dropped one deletes its copy), and moving the leader
is a handover (`HandOver` "transfer"). A move that waits for a new member to
catch up asks the leader, once per epoch and replica set, to `sync` it, so
`ha-sync-mode: manual` does not stall it. A member removed from the cluster
(neither recorded nor a Raft member) is replaced like a copy on a shared host.

Invariants:
- at most one step in flight per queue, and at most `MAX_MOVES_IN_FLIGHT`;
- exclusive queues and queues whose leader node is down are left alone;
- a `sync` is asked once per (epoch, replica set) of a queue;
- a scan runs only when the metadata changed since the last one (or moves
  are under way), so an idle cluster with many queues costs nothing.
"""

from __future__ import annotations

import logging

from logbroker.cluster.controller_events import (
    ClusterView,
    ControllerEffect,
    HandOver,
    Notice,
    Propose,
    RequestIds,
)
from logbroker.metadata import MetadataState, QueueRecord, SetQueuePlacement
from logbroker.queue_placement import NodeView, PlacementError, replica_count_or_nodes
from logbroker.replica_moves import ReplicaStep, next_step

MAX_MOVES_IN_FLIGHT = 64
QueueKey = tuple[str, str]  # (vhost, queue)


class ReplicaMover:
    def __init__(self, ids: RequestIds) -> None:
        self._ids = ids
        self._moving: dict[int, QueueKey] = {}  # request -> queue
        # sync asked for, per queue: (epoch, replica set), so it is asked once per change
        self._synced: dict[QueueKey, tuple[int, tuple[str, ...]]] = {}
        self._scanned_index = -1  # the metadata scanned last: unchanged, nothing to do

    @property
    def moving(self) -> frozenset[QueueKey]:
        return frozenset(self._moving.values())

    def scan(self, view: ClusterView) -> list[ControllerEffect]:
        if view.applied_index == self._scanned_index and not self._moving:
            return []  # every step depends on the metadata only
        self._scanned_index = view.applied_index
        state = view.state
        nodes = [NodeView(n.name, n.up, n.host_id, n.zone) for n in state.cluster_nodes()]
        up = {node.name for node in nodes if node.up}
        known = {node.name for node in nodes} | view.members
        counts = state.queue_member_counts()
        moving = set(self._moving.values())
        effects: list[ControllerEffect] = []
        for vhost in state.vhosts():
            for record in state.queues(vhost.name):
                key = (vhost.name, record.name)
                if (len(self._moving) >= MAX_MOVES_IN_FLIGHT or key in moving
                        or record.leader_node not in up or record.exclusive):
                    continue
                removed = [m for m in record.members if m not in known] \
                    if view.members else []
                step = _step(state, record, nodes, counts, removed)
                if step is None or not self._worth_asking(key, record, step):
                    continue
                effects += self._take(key, record, step)
        return effects

    def _worth_asking(self, key: QueueKey, record: QueueRecord, step: ReplicaStep) -> bool:
        if step.kind != "sync":
            return True
        if self._synced.get(key) == (record.epoch, record.members):
            return False
        self._synced[key] = (record.epoch, record.members)
        return True

    def _take(self, key: QueueKey, record: QueueRecord, step: ReplicaStep
              ) -> list[ControllerEffect]:
        assert record.leader_node is not None
        request = self._ids.next()
        self._moving[request] = key
        vhost, name = key
        if step.kind == "sync":
            return [HandOver(request, "sync", vhost, name)]
        if step.kind == "transfer":
            return [Notice(logging.INFO, f"queue {name!r} in vhost {vhost!r}: leader moves "
                                         f"{record.leader_node} -> {step.target} (policy)"),
                    HandOver(request, "transfer", vhost, name, step.target)]
        return [Notice(logging.INFO, f"queue {name!r} in vhost {vhost!r}: replicas "
                                     f"{list(record.members)} -> {list(step.members)} (policy)"),
                Propose(request, SetQueuePlacement(vhost, name, record.leader_node,
                                                   step.members))]

    def done(self, request: int, error: str | None) -> list[ControllerEffect]:
        """A step ended (its proposal or its handover)."""
        key = self._moving.pop(request, None)
        if key is None or error is None:
            return []
        return [Notice(logging.INFO, f"queue {key[1]!r}: replica change postponed: {error}")]


def _step(state: MetadataState, record: QueueRecord, nodes: list[NodeView],
          counts: dict[str, int], removed: list[str]) -> ReplicaStep | None:
    assert record.leader_node is not None
    try:
        spec = replica_count_or_nodes(
            record.arguments, state.queue_policy_definition(record.vhost, record.name))
    except PlacementError:
        return None  # the policy is broken: leave the queue as it is
    return next_step(spec, record.leader_node, record.members, record.in_sync, nodes, counts,
                     removed)
