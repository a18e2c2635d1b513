"""`QueueFailover`: the controller moves queues away from nodes that are down (pure).

Theory of operation. On every controller check (a beat, a link grace that
ran out, liveness changes applied), each replicated queue whose leader node
the metadata records as down, or that was removed from the cluster (it will
never come back), gets an election: the controller asks every
other member for its copy's status (`AskStatus`, `r.status`: log end, last
epoch, when its node started), waits for every answer or the status
timeout, lets `replication.queue.failover.choose_leader` pick by the seeds'
rule, and proposes `ElectQueueLeader` for the epoch of the record it read.
A queue with no in-sync member answering stays where it is (unavailable, its
record naming the down node) and is retried on the next check, unless its
policy says `ha-promote-on-failure: always`: then the best out-of-sync copy
is promoted, which is reported and counted.

Invariants:
- at most one election per queue at a time;
- an election proposes only for the epoch of the record it read, so a second
  or stale election changes nothing (the metadata refuses it, or elects no
  one outside the in-sync set unless told `out_of_sync`);
- an election decides once: when the last asked member answered or at its
  deadline, whichever comes first; later answers are ignored;
- an election, once begun, runs to its end even if this node stops leading
  (its proposal is then forwarded to the new leader).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from logbroker.cluster.controller_events import (
    AskStatus,
    ControllerEffect,
    Notice,
    Propose,
    RequestIds,
    SetTimer,
)
from logbroker.metadata import ElectQueueLeader, MetadataState, QueueRecord
from replication.queue import failover
from replication.queue.failover import Promotion, ReplicaStatus

STATUS_TIMEOUT_MS = 1000
QueueKey = tuple[str, str]  # (vhost, queue)


@dataclass
class _Election:
    record: QueueRecord
    deadline_ms: int
    promote_always: bool
    waiting: set[int] = field(default_factory=set)  # status requests not answered yet
    statuses: list[ReplicaStatus] = field(default_factory=list)
    promotion: Promotion | None = None  # set once decided: the proposal is in flight


class QueueFailover:
    def __init__(self, ids: RequestIds, status_timeout_ms: int = STATUS_TIMEOUT_MS) -> None:
        self._ids = ids
        self._timeout_ms = status_timeout_ms
        self._electing: dict[QueueKey, _Election] = {}
        self._asked: dict[int, QueueKey] = {}
        self._proposed: dict[int, QueueKey] = {}
        self.elections = 0
        self.out_of_sync_promotions = 0

    @property
    def electing(self) -> frozenset[QueueKey]:
        return frozenset(self._electing)

    def scan(self, state: MetadataState, now_ms: int,
             raft_members: frozenset[str] = frozenset()) -> list[ControllerEffect]:
        """Begin an election for every replicated queue led by a node that is down or
        gone: removed from the cluster (neither a recorded node nor a Raft member; a
        founding member not recorded yet is still a Raft member)."""
        nodes = state.cluster_nodes()
        down = {record.name for record in nodes if not record.up}
        known = {record.name for record in nodes} | raft_members
        effects: list[ControllerEffect] = []
        if not down and not raft_members:
            return effects
        for vhost in state.vhosts():
            for record in state.queues(vhost.name):
                leader = record.leader_node
                gone = bool(raft_members) and leader is not None and leader not in known
                if (record.replicated and (leader in down or gone)
                        and (vhost.name, record.name) not in self._electing):
                    effects += self._begin(state, record, now_ms)
        return effects

    def _begin(self, state: MetadataState, record: QueueRecord, now_ms: int
               ) -> list[ControllerEffect]:
        key = (record.vhost, record.name)
        definition = state.queue_policy_definition(record.vhost, record.name)
        election = _Election(record, now_ms + self._timeout_ms,
                             definition.get("ha-promote-on-failure") == "always")
        self._electing[key] = election
        effects: list[ControllerEffect] = [Notice(logging.INFO, (
            f"queue {record.name!r} in vhost {record.vhost!r}: leader node "
            f"{record.leader_node} is down (epoch {record.epoch}): election"))]
        for member in record.members:
            if member != record.leader_node:
                request = self._ids.next()
                self._asked[request] = key
                election.waiting.add(request)
                effects.append(AskStatus(request, member, record.vhost, record.name,
                                         self._timeout_ms))
        if not election.waiting:
            return effects + self._decide(*key)
        return [*effects, SetTimer(election.deadline_ms)]

    def answered(self, request: int, status: ReplicaStatus | None) -> list[ControllerEffect]:
        key = self._asked.pop(request, None)
        election = self._electing.get(key) if key is not None else None
        if election is None or election.promotion is not None:
            return []
        election.waiting.discard(request)
        if status is not None:
            election.statuses.append(status)
        return [] if election.waiting else self._decide(election.record.vhost,
                                                        election.record.name)

    def tick(self, now_ms: int) -> list[ControllerEffect]:
        """Decide the elections whose status timeout ran out."""
        effects: list[ControllerEffect] = []
        for key, election in list(self._electing.items()):
            if election.promotion is None and now_ms >= election.deadline_ms:
                effects += self._decide(*key)
        return effects

    def _decide(self, vhost: str, name: str) -> list[ControllerEffect]:
        election = self._electing[(vhost, name)]
        for request in election.waiting:
            self._asked.pop(request, None)
        election.waiting.clear()
        record = election.record
        assert record.leader_node is not None
        # Looked up on the module at each call: a test may replace the rule.
        promotion = failover.choose_leader(record.leader_node, record.in_sync,
                                           election.statuses, election.promote_always)
        if promotion is None:
            del self._electing[(vhost, name)]
            return [Notice(logging.WARNING, (
                f"queue {name!r} in vhost {vhost!r}: leader node {record.leader_node} is "
                f"down and no in-sync replica answers (in sync {list(record.in_sync)}); it "
                "stays unavailable"))]
        election.promotion = promotion
        request = self._ids.next()
        self._proposed[request] = (vhost, name)
        return [Propose(request, ElectQueueLeader(
            vhost, name, record.epoch, promotion.leader, promotion.in_sync,
            out_of_sync=promotion.out_of_sync))]

    def proposed(self, request: int, error: str | None) -> list[ControllerEffect]:
        key = self._proposed.pop(request, None)
        if key is None:
            return []
        election = self._electing.pop(key)
        record, promotion = election.record, election.promotion
        assert promotion is not None
        if error is not None:
            return [Notice(logging.WARNING, f"queue {key[1]!r}: election failed: {error}")]
        self.elections += 1
        effects: list[ControllerEffect] = []
        if promotion.out_of_sync:
            self.out_of_sync_promotions += 1
            effects.append(Notice(logging.WARNING, (
                f"queue {key[1]!r} in vhost {key[0]!r}: promoted OUT-OF-SYNC replica on "
                f"{promotion.leader} (ha-promote-on-failure: always); confirmed messages may "
                "be lost")))
        # Applied is not elected: the metadata ignores a decision the record outran.
        effects.append(Notice(logging.INFO, (
            f"queue {key[1]!r} in vhost {key[0]!r}: {promotion.leader} elected for epoch "
            f"{record.epoch + 1}, in sync {list(promotion.in_sync)}")))
        return effects
