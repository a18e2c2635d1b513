"""`Controller`: the cluster controller's decisions, as a pure core.

Theory of operation. The Raft leader is the controller. Every node sends it
a heartbeat on every beat (`SendHeartbeat`, heard as `Heard`); the transport
tells it when a
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
`ProposalDone`, `HandoverDone`) and the status deadline (`tick`). A new
controller that finds the metadata empty proposes the bootstrap commands
(the default vhost and user), one after the other.

Invariants:
- only the controller checks: `beat` and the link-grace checks do nothing
  on a node that does not lead; answers to what was asked while leading are
  still taken (an election runs to its end);
- a controller that just took over (`TookOver`) gives every member a fresh
  session timeout, and the members it has no link to only what is left of
  their link grace;
- the controller never declares itself down (it hears itself on every beat);
- the bootstrap commands go one at a time, in order (each needs the one
  before), and a refused one is reported, not retried (they refuse to apply
  twice anyway);
- the core never reads a clock or waits: time is `view.now_ms`, and every
  wait is a request number or a `SetTimer`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from logbroker.cluster.controller_events import (
    ClusterView,
    ControllerEffect,
    ControllerEvent,
    HandoverDone,
    Heard,
    LinkLost,
    LinkRestored,
    Notice,
    ProposalDone,
    Propose,
    RequestIds,
    SendHeartbeat,
    SetTimer,
    StatusAnswered,
    TookOver,
)
from logbroker.cluster.liveness import LivenessTracker, NodeAddress
from logbroker.cluster.queue_failover import STATUS_TIMEOUT_MS, QueueFailover
from logbroker.cluster.replica_mover import ReplicaMover
from logbroker.metadata import Command

LINK_CHECK_SLACK_MS = 20  # a timer may fire a little early: check just after the grace


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    node: str
    session_timeout_ms: int
    link_grace_ms: int
    status_timeout_ms: int = STATUS_TIMEOUT_MS
    link_check_slack_ms: int = LINK_CHECK_SLACK_MS
    # What an empty metadata starts with (made only when needed: it hashes a password).
    bootstrap: Callable[[], list[Command]] = field(default=list)


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
        self._bootstrap: list[Command] = []  # still to propose, in order
        self._bootstrapping: int | None = None  # the request in flight

    def beat(self, view: ClusterView, own: NodeAddress) -> list[ControllerEffect]:
        """Every node's beat: a heartbeat to the controller, or, on the controller, its
        periodic check."""
        if not view.leading:
            return [] if view.leader is None else [SendHeartbeat(view.leader, own)]
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
            return self._bootstrap_if_empty(view)
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
        effects += self.failover.scan(view.state, view.now_ms, view.members)
        return effects + self.mover.scan(view)

    def _bootstrap_if_empty(self, view: ClusterView) -> list[ControllerEffect]:
        state = view.state
        if (state.vhost("/") is not None or state.users() or self._bootstrap
                or self._bootstrapping is not None):
            return []
        self._bootstrap = list(self.config.bootstrap())
        return self._next_bootstrap()

    def _next_bootstrap(self) -> list[ControllerEffect]:
        if not self._bootstrap:
            self._bootstrapping = None
            return []
        self._bootstrapping = self._ids.next()
        return [Propose(self._bootstrapping, self._bootstrap.pop(0))]

    def _proposal_done(self, event: ProposalDone, view: ClusterView) -> list[ControllerEffect]:
        if event.request == self._bootstrapping:
            refused: list[ControllerEffect] = [] if event.error is None else [
                Notice(logging.INFO, f"bootstrap command not applied: {event.error}")]
            return refused + self._next_bootstrap()
        if event.request in self._liveness_proposals:
            self._liveness_proposals.discard(event.request)
            # A node just recorded down: its queues fail over now, not at the next beat.
            return [] if self._liveness_proposals else self.failover.scan(
                view.state, view.now_ms, view.members)
        return (self.failover.proposed(event.request, event.error)
                + self.mover.done(event.request, event.error))
