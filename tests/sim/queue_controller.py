"""The controller's side of a simulated node: liveness and queue failover.

It mirrors `ClusterNode._beat` / `_check_liveness` and `QueueFailover`
(logbroker/cluster/cluster_node.py, queue_failover.py). On every beat, and
once the link grace runs out after a peer's link broke (a crashed process
closes its sockets at once), the Raft leader asks the pure `LivenessTracker`
(heartbeats heard, links lost, the session timeout) and proposes what it
decides (`AddClusterNode`, `SetNodeLiveness`), scanning again once those are
applied (`_propose_then_fail_over`); a scan looks in the metadata for
replicated queues whose leader node is recorded down and,
one election at a time per queue, asks every other member for its copy's
status (`r.status`), waits for every answer or the status timeout, lets
`choose_leader` pick (never out of sync: the default `when-synced`), and
proposes `ElectQueueLeader` for the record's epoch with the promotion's
`out_of_sync` (the metadata then changes nothing if the chosen node left the
in-sync set since the record was read: the next scan decides again). An
election, once
begun, runs to its end even if this node stops leading (the real task does:
its proposal is then forwarded to the new leader).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from logbroker.cluster.liveness import LivenessTracker, NodeAddress
from logbroker.metadata import Command, ElectQueueLeader, MetadataState, QueueRecord
from replication.queue import failover
from replication.queue.failover import ReplicaStatus
from tests.sim.queue_messages import StatusRequest

VHOST = "/"
STATUS_TIMEOUT = 8  # ticks (STATUS_TIMEOUT_S)


def address_of(node: str) -> NodeAddress:
    return NodeAddress(node, "127.0.0.1", 4000 + int(node.lstrip("n")), 0, 0)


class ControllerHost(Protocol):
    """The node a controller runs on."""

    id: str
    state: MetadataState

    @property
    def now(self) -> int: ...

    def members(self) -> frozenset[str]: ...

    def propose(self, command: Command, done: Callable[[bool], None] | None = None
                ) -> None: ...

    def request_id(self) -> int: ...

    def send_status_request(self, request: StatusRequest) -> None: ...

    def replica_status(self, queue: str) -> ReplicaStatus | None: ...

    def log(self, text: str) -> None: ...


@dataclass
class Election:
    record: QueueRecord
    deadline: int
    asked: dict[int, str] = field(default_factory=dict)  # request -> member
    statuses: list[ReplicaStatus] = field(default_factory=list)
    proposing: bool = False


class Controller:
    def __init__(self, node: str, session_timeout: int, link_grace: int) -> None:
        self.liveness = LivenessTracker(node, session_timeout, link_grace)
        self.electing: dict[str, Election] = {}
        self.elections = 0

    def beat(self, host: ControllerHost) -> None:
        """`_beat` on the Raft leader."""
        self.liveness.heard(address_of(host.id), host.now)
        self.check(host)

    def check(self, host: ControllerHost) -> None:
        """`_check_liveness`: liveness decisions, then `failover.scan`."""
        commands = self.liveness.decide(host.members(), host.state.cluster_nodes(), host.now)
        if commands:
            waiting = [len(commands)]

            def done(ok: bool) -> None:
                waiting[0] -= 1
                if not waiting[0]:
                    self._scan(host)

            for command in commands:
                host.propose(command, done)
        self._scan(host)

    def _scan(self, host: ControllerHost) -> None:
        state = host.state
        down = {record.name for record in state.cluster_nodes() if not record.up}
        if not down:
            return
        for record in state.queues(VHOST):
            if (record.replicated and record.leader_node in down
                    and record.name not in self.electing):
                self._begin(host, record)

    def _begin(self, host: ControllerHost, record: QueueRecord) -> None:
        election = Election(record, host.now + STATUS_TIMEOUT)
        self.electing[record.name] = election
        host.log(f"{host.id} controller: {record.leader_node} (leader of {record.name}, "
                 f"epoch {record.epoch}) is down: election")
        for member in record.members:
            if member == record.leader_node:
                continue
            if member == host.id:
                local = host.replica_status(record.name)
                if local is not None:
                    election.statuses.append(local)
                continue
            request = host.request_id()
            election.asked[request] = member
            host.send_status_request(StatusRequest(host.id, member, request, record.name))

    def on_status(self, request: int, status: ReplicaStatus | None) -> None:
        for election in self.electing.values():
            if request in election.asked and not election.proposing:
                del election.asked[request]
                if status is not None:
                    election.statuses.append(status)

    def tick(self, host: ControllerHost) -> None:
        for name, election in list(self.electing.items()):
            if election.proposing or (election.asked and host.now < election.deadline):
                continue
            self._decide(host, name, election)

    def _decide(self, host: ControllerHost, name: str, election: Election) -> None:
        record = election.record
        assert record.leader_node is not None
        promotion = failover.choose_leader(record.leader_node, record.in_sync, election.statuses,
                                  promote_out_of_sync=False)
        if promotion is None:
            host.log(f"{host.id} controller: {name} has no in-sync replica answering "
                     f"(in sync {list(record.in_sync)}); it stays unavailable")
            del self.electing[name]
            return
        election.proposing = True
        command = ElectQueueLeader(VHOST, name, record.epoch, promotion.leader,
                                   promotion.in_sync, out_of_sync=promotion.out_of_sync)

        def done(ok: bool) -> None:
            self.electing.pop(name, None)
            if ok:
                self.elections += 1
            # Applied is not elected: a stale decision changes nothing.
            host.log(f"{host.id} controller: elect {promotion.leader} for {name} at epoch "
                     f"{record.epoch + 1} in sync {list(promotion.in_sync)}: "
                     f"{'applied' if ok else 'failed'}")

        host.propose(command, done)

    def crash(self) -> None:
        self.electing.clear()
