"""The simulation's implementations of the shipped drivers' ports.

A simulated node runs the shipped `ControllerDriver` (logbroker/cluster/
controller_driver.py) and `ProposalDriver` (proposal_driver.py) over these:
the clock is the simulation's tick counter (one tick is one millisecond to
the cores), timers are the world's `later`, status requests and forwarded
proposals travel the simulated network (`StatusRequest` / `StatusAnswer`,
`Propose` / `ProposeAnswer`; a lost one is never answered: the core's
deadline covers it).

`SimRaftProposer` stands for what the asyncio node gets from its
`RaftDriver` (`propose`, whose `ProposalTable` answers once the entry is
applied, or drops it when another term's entry took its index or the
leadership is lost) and `ReplicatedMetadata._serve_propose`, on the bare
`RaftNode` the simulation steps. Nothing here decides what to propose,
where, or whether to retry: that is the shipped cores'.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Protocol

from logbroker.cluster.controller_driver import Done
from logbroker.cluster.liveness import NodeAddress
from logbroker.cluster.metadata_proposals import Accepted, Failed, Outcome, Retry
from logbroker.cluster.proposal_driver import OnOutcome
from logbroker.errors import BrokerError
from logbroker.metadata import Command, MetadataError, MetadataState
from logbroker.metadata import decode_command as _decode_command
from logbroker.metadata.reply_codes import INTERNAL_ERROR
from replication.queue.failover import ReplicaStatus
from replication.raft import Entry, NotLeader, ProposalRefused, RaftNode, Role
from tests.sim.queue_messages import (
    ClusterMessage,
    Heartbeat,
    Propose,
    ProposeAnswer,
    StatusRequest,
)


@lru_cache(maxsize=4096)
def decode_command(data: bytes) -> Command:
    """Commands are immutable: every node (and every replay) decodes an entry once."""
    return _decode_command(data)


def address_of(node: str) -> NodeAddress:
    return NodeAddress(node, "127.0.0.1", 4000 + int(node.lstrip("n")), 0, 0)


class SimWorld(Protocol):
    now: int

    def send(self, message: ClusterMessage) -> None: ...

    def request_id(self) -> int: ...

    def later(self, delay: int, action: Callable[[], None]) -> None: ...


class PortsHost(Protocol):
    """The simulated node whose ports these are."""

    id: str
    raft: RaftNode | None
    state: MetadataState
    applied_index: int

    @property
    def world(self) -> SimWorld: ...

    def propose(self, command: Command, done: Callable[[bool], None] | None = None
                ) -> None: ...

    def replica_status(self, queue: str) -> ReplicaStatus | None: ...

    def log(self, text: str) -> None: ...


class SimMetadataView:
    def __init__(self, host: PortsHost) -> None:
        self._host = host

    def leading(self) -> bool:
        raft = self._host.raft
        return raft is not None and raft.role is Role.LEADER

    def leader(self) -> str | None:
        raft = self._host.raft
        return raft.leader_id if raft is not None else None

    def members(self) -> frozenset[str]:
        raft = self._host.raft
        return raft.membership.nodes if raft is not None else frozenset()

    def state(self) -> MetadataState:
        return self._host.state

    def applied_index(self) -> int:
        return self._host.applied_index


class SimProposer:
    def __init__(self, host: PortsHost) -> None:
        self._host = host

    def propose(self, command: Command, on_done: Done) -> None:
        self._host.propose(command, lambda ok: on_done(None if ok else "not applied"))


class SimStatusAsker:
    """`r.status` over the simulated network; the node's own copy is read in place."""

    def __init__(self, host: PortsHost) -> None:
        self._host = host
        self._waiting: dict[int, Callable[[ReplicaStatus | None], None]] = {}

    def ask_status(self, member: str, vhost: str, queue: str, timeout_ms: int,
                   on_answer: Callable[[ReplicaStatus | None], None]) -> None:
        host = self._host
        if member == host.id:
            on_answer(host.replica_status(queue))
            return
        request = host.world.request_id()
        self._waiting[request] = on_answer
        host.world.send(StatusRequest(host.id, member, request, queue))

    def answered(self, request: int, status: ReplicaStatus | None) -> None:
        on_answer = self._waiting.pop(request, None)
        if on_answer is not None:
            on_answer(status)


class SimHandovers:
    """The simulation's queues keep their replica sets: no step ever asks for these."""

    def __init__(self, host: PortsHost) -> None:
        self._host = host

    def sync(self, vhost: str, queue: str, on_done: Done) -> None:
        self._host.log(f"{self._host.id}: sync of {queue} asked (not simulated)")
        on_done("not simulated")

    def transfer(self, vhost: str, queue: str, target: str | None, on_done: Done) -> None:
        self._host.log(f"{self._host.id}: transfer of {queue} asked (not simulated)")
        on_done("not simulated")


class SimHeartbeats:
    def __init__(self, host: PortsHost) -> None:
        self._host = host

    def send(self, leader: str, address: NodeAddress) -> None:
        self._host.world.send(Heartbeat(self._host.id, leader))


class SimTimers:
    def __init__(self, world: SimWorld) -> None:
        self._world = world

    def call_at(self, monotonic_ms: int, action: Callable[[], None]) -> None:
        self._world.later(max(0, monotonic_ms - self._world.now), action)


class SimControllerPorts:
    def __init__(self, host: PortsHost) -> None:
        self.metadata = SimMetadataView(host)
        self.proposer = SimProposer(host)
        self.status = SimStatusAsker(host)
        self.handovers = SimHandovers(host)
        self.heartbeats = SimHeartbeats(host)
        self.timers = SimTimers(host.world)


# ------------------------------------------------------------------ proposals

class SimRaftProposer:
    """The Raft leader's side of a proposal (see the module's docstring)."""

    def __init__(self, host: PortsHost) -> None:
        self._host = host
        self._serving: dict[int, tuple[int, OnOutcome]] = {}  # index -> (term, answer)

    def serve(self, data: bytes, answer: OnOutcome) -> None:
        raft = self._host.raft
        assert raft is not None
        if raft.role is not Role.LEADER:
            answer(Retry())  # certainly not applied
            return
        try:
            self._host.state.check(decode_command(data))
            index = raft.propose(data)
        except NotLeader:
            answer(Retry())
            return
        except (MetadataError, ProposalRefused) as error:
            answer(Failed(_error(str(error))))
            return
        self._serving[index] = (raft.term, answer)

    def applied(self, entry: Entry, ok: bool, reason: str) -> None:
        served = self._serving.pop(entry.index, None)
        if served is None:
            return
        term, answer = served
        if entry.term != term:
            answer(Failed(_error("dropped: another term's entry took its index")))
        else:
            answer(Accepted(entry.index) if ok else Failed(_error(reason)))

    def leadership_lost(self) -> None:
        serving, self._serving = self._serving, {}
        for _, answer in serving.values():
            answer(Failed(_error("dropped: the leader stepped down")))


def _error(text: str) -> BrokerError:
    return BrokerError(INTERNAL_ERROR, text)


class SimProposalPorts:
    """The `ProposalDriver`'s ports: this node's Raft, the network to the leader."""

    def __init__(self, host: PortsHost, raft_proposer: SimRaftProposer) -> None:
        self._host = host
        self._raft_proposer = raft_proposer
        self._forwarded: dict[int, OnOutcome] = {}
        self._applied_waiters: list[tuple[int, OnOutcome]] = []

    def leader(self) -> str | None:
        raft = self._host.raft
        return raft.leader_id if raft is not None else None

    def leading(self) -> bool:
        raft = self._host.raft
        return raft is not None and raft.role is Role.LEADER

    def propose_here(self, data: bytes, timeout_ms: int, on_outcome: OnOutcome) -> None:
        def answer(outcome: Outcome) -> None:  # applied here already: nothing to wait for
            on_outcome(Accepted() if isinstance(outcome, Accepted) else outcome)
        self._raft_proposer.serve(data, answer)

    def forward(self, leader: str, data: bytes, timeout_ms: int,
                on_outcome: OnOutcome) -> None:
        host = self._host
        request = host.world.request_id()
        self._forwarded[request] = on_outcome
        host.world.send(Propose(host.id, leader, request, data))

    def answered(self, answer: ProposeAnswer) -> None:
        on_outcome = self._forwarded.pop(answer.request, None)
        if on_outcome is None:
            return  # a duplicate
        if answer.ok:
            on_outcome(Accepted(answer.index))
        else:
            on_outcome(Retry() if answer.reason == "not_leader" else Failed(_error(answer.reason)))

    def wait_applied(self, index: int, timeout_ms: int, on_outcome: OnOutcome) -> None:
        if self._host.applied_index >= index:
            on_outcome(Accepted())
        else:
            self._applied_waiters.append((index, on_outcome))

    def applied_through(self, index: int) -> None:
        due = [waiter for waiter in self._applied_waiters if waiter[0] <= index]
        if due:
            self._applied_waiters = [w for w in self._applied_waiters if w[0] > index]
            for _, on_outcome in due:
                on_outcome(Accepted())

    def call_at(self, monotonic_ms: int, action: Callable[[], None]) -> None:
        world = self._host.world
        world.later(max(0, monotonic_ms - world.now), action)


def answer_message(source: str, target: str, request: int, outcome: Outcome) -> ProposeAnswer:
    """The leader's answer to a forwarded `Propose`, as `_serve_propose` sends it."""
    if isinstance(outcome, Accepted):
        return ProposeAnswer(source, target, request, True, index=outcome.index or 0)
    if isinstance(outcome, Retry):
        return ProposeAnswer(source, target, request, False, "not_leader")
    reason = outcome.error.text if isinstance(outcome, Failed) else "timed out"
    return ProposeAnswer(source, target, request, False, reason)
