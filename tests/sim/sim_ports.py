"""The simulation's implementations of the shipped drivers' ports.

A simulated node runs the shipped `ControllerDriver` (logbroker/cluster/
controller_driver.py) over these: the clock is the simulation's tick
counter (one tick is one millisecond to the cores), timers are the world's
`later`, proposals go through the node's proposals, status requests travel
the simulated network as `StatusRequest` / `StatusAnswer` (a lost one is
never answered: the election's deadline covers it). Nothing here decides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from logbroker.cluster.controller_driver import Done
from logbroker.cluster.liveness import NodeAddress
from logbroker.metadata import Command, MetadataState
from replication.queue.failover import ReplicaStatus
from replication.raft import RaftNode, Role
from tests.sim.queue_messages import ClusterMessage, StatusRequest


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


class SimClock:
    def __init__(self, world: SimWorld) -> None:
        self._world = world

    def monotonic_ms(self) -> int:
        return self._world.now

    def wall_ms(self) -> int:
        return self._world.now


class SimMetadataView:
    def __init__(self, host: PortsHost) -> None:
        self._host = host

    def leading(self) -> bool:
        raft = self._host.raft
        return raft is not None and raft.role is Role.LEADER

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


class SimTimers:
    def __init__(self, world: SimWorld) -> None:
        self._world = world

    def call_at(self, at_ms: int, action: Callable[[], None]) -> None:
        self._world.later(max(0, at_ms - self._world.now), action)


class SimControllerPorts:
    def __init__(self, host: PortsHost) -> None:
        self.metadata = SimMetadataView(host)
        self.proposer = SimProposer(host)
        self.status = SimStatusAsker(host)
        self.handovers = SimHandovers(host)
        self.timers = SimTimers(host.world)
