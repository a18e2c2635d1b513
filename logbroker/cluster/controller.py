"""`Controller`: the cluster controller's decisions, as a pure core.

Theory of operation. The Raft leader is the controller. Every node sends it
a heartbeat every `heartbeat_ms` (`Heard`); the transport tells it when a
link to a peer breaks or comes back (`LinkLost` / `LinkRestored`). The
driver calls `beat` on every heartbeat period and `tick` when a timer the
core asked for (`SetTimer`) is due; each call gets a `ClusterView` (the
clock, whether this node leads, the membership, the applied metadata) and
returns effects: commands to propose, status requests to send, handovers,
timers, notices.

A check (on the controller's beat, when a broken link's grace ran out, and
when the liveness commands it proposed are done) does, in order:
1. liveness (`LivenessTracker`): `AddClusterNode` for a node heard at a new
   address, `SetNodeLiveness` for a node that went down or came back;
2. failover (`QueueFailover`): an election for each replicated queue whose
   leader node is recorded down;
3. replica moves (`ReplicaMover`): one step per queue towards its policy.
Elections and moves wait for answers through events (`StatusAnswered`,
`ProposalDone`, `HandoverDone`) and the status deadline (`tick`).

Invariants:
- only the controller checks: `beat` and the link-grace checks do nothing
  on a node that does not lead; answers to what was asked while leading are
  still taken (an election runs to its end);
- a controller that just took over (`TookOver`) gives every member a fresh
  session timeout, and the members it has no link to only what is left of
  their link grace;
- the controller never declares itself down (it hears itself on every beat);
- the core never reads a clock or waits: time is `view.now_ms`, and every
  wait is a request number or a `SetTimer`.
"""

from __future__ import annotations

from dataclasses import dataclass

from logbroker.cluster.controller_events import (
    ClusterView,
    ControllerEffect,
    ControllerEvent,
    HandoverDone,
    Heard,
    LinkLost,
    LinkRestored,
    ProposalDone,
    Propose,
    RequestIds,
    SetTimer,
    StatusAnswered,
    TookOver,
)
from logbroker.cluster.liveness import LivenessTracker, NodeAddress
from logbroker.cluster.queue_failover import STATUS_TIMEOUT_MS, QueueFailover
from logbroker.cluster.replica_mover import ReplicaMover

LINK_CHECK_SLACK_MS = 20  # a timer may fire a little early: check just after the grace


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    node: str
    session_timeout_ms: int
    link_grace_ms: int
    status_timeout_ms: int = STATUS_TIMEOUT_MS
    link_check_slack_ms: int = LINK_CHECK_SLACK_MS


class Controller:
    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        self._ids = RequestIds()
        self.liveness = LivenessTracker(config.node, config.session_timeout_ms,
                                        config.link_grace_ms)
        self.failover = QueueFailover(self._ids, config.status_timeout_ms)
        self.mover = ReplicaMover(self._ids)
        self._link_checks: list[int] = []  # when a broken link's grace runs out
        self._liveness_proposals: set[int] = set()

    def beat(self, view: ClusterView, own: NodeAddress) -> list[ControllerEffect]:
        """The controller's periodic check (nothing on a node that does not lead)."""
        if not view.leading:
            return []
        self.liveness.heard(own, view.now_ms)
        return self._check(view)

    def tick(self, view: ClusterView) -> list[ControllerEffect]:
        """A timer is due: decide the elections whose status timeout ran out, and check
        once a broken link's grace is over (not at the next beat)."""
        effects = self.failover.tick(view.now_ms)
        due = [at for at in self._link_checks if at <= view.now_ms]
        if due:
            self._link_checks = [at for at in self._link_checks if at > view.now_ms]
            effects += self._check(view)
        return effects

    def step(self, event: ControllerEvent, view: ClusterView) -> list[ControllerEffect]:
        now = view.now_ms
        if isinstance(event, Heard):
            self.liveness.heard(event.address, now)
        elif isinstance(event, LinkLost):
            self.liveness.link_lost(event.peer, now)
            at = now + self.config.link_grace_ms + self.config.link_check_slack_ms
            self._link_checks.append(at)
            return [SetTimer(at)]
        elif isinstance(event, LinkRestored):
            self.liveness.link_restored(event.peer)
        elif isinstance(event, TookOver):
            self.liveness.took_over(view.members, now, event.disconnected)
        elif isinstance(event, StatusAnswered):
            return self.failover.answered(event.request, event.status)
        elif isinstance(event, ProposalDone):
            return self._proposal_done(event, view)
        elif isinstance(event, HandoverDone):
            return self.mover.done(event.request, event.error)
        return []

    def _check(self, view: ClusterView) -> list[ControllerEffect]:
        if not view.leading:
            return []
        effects: list[ControllerEffect] = []
        for command in self.liveness.decide(view.members, view.state.cluster_nodes(),
                                            view.now_ms, view.wall_ms):
            request = self._ids.next()
            self._liveness_proposals.add(request)
            effects.append(Propose(request, command))
        effects += self.failover.scan(view.state, view.now_ms)
        return effects + self.mover.scan(view)

    def _proposal_done(self, event: ProposalDone, view: ClusterView) -> list[ControllerEffect]:
        if event.request in self._liveness_proposals:
            self._liveness_proposals.discard(event.request)
            # A node just recorded down: its queues fail over now, not at the next beat.
            return [] if self._liveness_proposals else self.failover.scan(view.state,
                                                                          view.now_ms)
        return (self.failover.proposed(event.request, event.error)
                + self.mover.done(event.request, event.error))
