"""`ControllerDriver`: runs the `Controller` core over narrow ports (no asyncio here).

Theory of operation. The driver is the one piece of shipped code between
the pure core and the world, used alike by the asyncio node (ports in
controller_ports.py) and by the simulation (its ports over the simulated
network, clock and Raft). It turns calls (`beat`, `heard`, `link_lost`,
...) and port callbacks (a proposal done, a status answered, a timer due)
into core events with a fresh `ClusterView`, and carries the returned
effects out through the ports, in order.

Invariants:
- the core is entered by one call at a time (`SerialCalls`): a port that
  answers at once (a local status, a refused proposal) queues its event,
  which runs after the effects of the current one;
- after `stop`, nothing reaches the core and no effect is carried out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from logbroker.cluster.controller import Controller
from logbroker.cluster.controller_events import (
    AskStatus,
    ClusterView,
    ControllerEffect,
    ControllerEvent,
    HandOver,
    HandoverDone,
    Heard,
    LinkLost,
    LinkRestored,
    Notice,
    ProposalDone,
    Propose,
    SendHeartbeat,
    SetTimer,
    StatusAnswered,
    TookOver,
)
from logbroker.cluster.liveness import NodeAddress
from logbroker.cluster.serial_calls import SerialCalls
from logbroker.metadata import Command, MetadataState
from replication.queue.failover import ReplicaStatus
from segments.clock import Clock

logger = logging.getLogger("logbroker.cluster.controller")
Done = Callable[[str | None], None]  # None: done; else why not


class MetadataView(Protocol):
    """The Raft side as the controller reads it."""

    def leading(self) -> bool: ...

    def leader(self) -> str | None: ...

    def members(self) -> frozenset[str]: ...

    def state(self) -> MetadataState: ...

    def applied_index(self) -> int: ...


class Proposer(Protocol):
    def propose(self, command: Command, on_done: Done) -> None: ...


class StatusAsker(Protocol):
    """`r.status` to a member (this node included), answered once or never."""

    def ask_status(self, member: str, vhost: str, queue: str, timeout_ms: int,
                   on_answer: Callable[[ReplicaStatus | None], None]) -> None: ...


class Handovers(Protocol):
    def sync(self, vhost: str, queue: str, on_done: Done) -> None: ...

    def transfer(self, vhost: str, queue: str, target: str | None, on_done: Done) -> None: ...


class Heartbeats(Protocol):
    def send(self, leader: str, address: NodeAddress) -> None: ...


class Timers(Protocol):
    def call_at(self, monotonic_ms: int, action: Callable[[], None]) -> object:
        """Run `action` once the clock's monotonic time reaches `monotonic_ms` (what it
        returns, a handle to cancel, is not used here)."""


class ControllerPorts(Protocol):
    @property
    def metadata(self) -> MetadataView: ...

    @property
    def proposer(self) -> Proposer: ...

    @property
    def status(self) -> StatusAsker: ...

    @property
    def handovers(self) -> Handovers: ...

    @property
    def heartbeats(self) -> Heartbeats: ...

    @property
    def timers(self) -> Timers: ...


def log_notice(level: int, text: str) -> None:
    logger.log(level, text)


class ControllerDriver:
    def __init__(self, core: Controller, ports: ControllerPorts, clock: Clock,
                 notice: Callable[[int, str], None] = log_notice) -> None:
        self.core = core
        self._ports = ports
        self._clock = clock
        self._notice = notice
        self._calls = SerialCalls()

    # ------------------------------------------------------------ the calls

    def beat(self, own: NodeAddress) -> None:
        self._run(lambda view: self.core.beat(view, own))

    def tick(self) -> None:
        self._run(self.core.tick)

    def heard(self, address: NodeAddress) -> None:
        self._step(Heard(address))

    def link_lost(self, peer: str) -> None:
        self._step(LinkLost(peer))

    def link_restored(self, peer: str) -> None:
        self._step(LinkRestored(peer))

    def took_over(self, disconnected: frozenset[str]) -> None:
        self._step(TookOver(disconnected))

    def stop(self) -> None:
        self._calls.stop()

    # ------------------------------------------------------------- the loop

    def _step(self, event: ControllerEvent) -> None:
        self._run(lambda view: self.core.step(event, view))

    def _run(self, call: Callable[[ClusterView], list[ControllerEffect]]) -> None:
        def run() -> None:
            for effect in call(self._view()):
                if not self._calls.stopped:
                    self._carry_out(effect)
        self._calls.run(run)

    def _view(self) -> ClusterView:
        metadata = self._ports.metadata
        return ClusterView(self._clock.monotonic_ms(), self._clock.wall_ms(),
                           metadata.leading(), metadata.leader(), metadata.members(),
                           metadata.state(), metadata.applied_index())

    def _carry_out(self, effect: ControllerEffect) -> None:
        ports = self._ports
        if isinstance(effect, Propose):
            ports.proposer.propose(effect.command, self._answer(ProposalDone, effect.request))
        elif isinstance(effect, AskStatus):
            request = effect.request
            ports.status.ask_status(
                effect.member, effect.vhost, effect.queue, effect.timeout_ms,
                lambda status: self._step(StatusAnswered(request, status)))
        elif isinstance(effect, HandOver):
            done = self._answer(HandoverDone, effect.request)
            if effect.kind == "sync":
                ports.handovers.sync(effect.vhost, effect.queue, done)
            else:
                ports.handovers.transfer(effect.vhost, effect.queue, effect.target, done)
        elif isinstance(effect, SendHeartbeat):
            ports.heartbeats.send(effect.leader, effect.address)
        elif isinstance(effect, SetTimer):
            ports.timers.call_at(effect.at_ms, self.tick)
        elif isinstance(effect, Notice):
            self._notice(effect.level, effect.text)

    def _answer(self, kind: type[ProposalDone] | type[HandoverDone], request: int) -> Done:
        return lambda error: self._step(kind(request, error))
