"""`ReplicatedMetadata`: the metadata state machine run on the Raft log.

Theory of operation. Every definition change is a `Command` proposed to the
Raft leader; once committed, every node applies it to its own `MetadataState`
in log order (`apply`, the `RaftStateMachine` side) and its broker reacts to
the events (`on_applied`). So all nodes hold the same definitions, and any
node answers reads from its applied state.

`propose(command)` is the client side. It checks the command against the local
state first (a refusal needs no round trip; the leader's apply is still the
judge); what follows - propose on the leader, or forward to it and wait
until applied here, retry while there is no leader, refuse with 541 at the
timeout - is decided by the pure `MetadataProposals` core
(metadata_proposals.py), run by the shipped `ProposalDriver` over this
module's asyncio ports (`RaftProposalPorts`: the Raft driver, the cluster
RPC, loop timers). `_serve_propose` is the leader's side of a forward.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

from logbroker.cluster.asyncio_ports import LoopTimers, TaskSet
from logbroker.cluster.cluster_rpc import INTERNAL_ERROR, ClusterRpc, PeerUnavailable
from logbroker.cluster.envelope import Envelope
from logbroker.cluster.metadata_proposals import (
    Accepted,
    Failed,
    MetadataProposals,
    Outcome,
    Retry,
    TimedOut,
)
from logbroker.cluster.proposal_driver import OnOutcome, ProposalDriver
from logbroker.errors import BrokerError
from logbroker.metadata import Applied, Command, MetadataState, decode_command, encode_command
from replication.raft.driver import RaftDriver
from replication.raft.errors import NotLeader, ProposalRefused, RaftError
from replication.raft.proposals import ProposalDropped, ProposalTimeout
from segments.clock import SYSTEM_CLOCK, Clock

logger = logging.getLogger(__name__)


class ReplicatedMetadata:
    def __init__(self, node_name: str, rpc: ClusterRpc, timeout_s: float = 5.0,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.node_name = node_name
        self._state = MetadataState()
        self._rpc = rpc
        self._timeout_s = timeout_s
        self.driver: RaftDriver | None = None
        self._timers = LoopTimers(clock)
        self._tasks = TaskSet()
        self._proposals = ProposalDriver(
            MetadataProposals(int(timeout_s * 1000)),
            RaftProposalPorts(lambda: self.driver, rpc, self._propose_here, self._tasks,
                              self._timers),
            clock)
        self.on_applied: Callable[[Applied], None] = lambda applied: None
        self.applying_index = 0  # the entry being applied (or last applied)
        self.on_restored: Callable[[], None] = lambda: None
        rpc.handle("metadata.propose", self._serve_propose)

    @property
    def state(self) -> MetadataState:
        return self._state

    def close(self) -> None:
        pass  # the Raft driver owns the log and is stopped by the cluster node

    async def stop(self) -> None:
        """Refuse the proposals in flight (the node stops) and end their tasks."""
        self._proposals.stop(BrokerError(INTERNAL_ERROR, f"node {self.node_name} is stopping"))
        self._timers.cancel_all()
        await self._tasks.cancel_all()

    # ------------------------------------------------------ RaftStateMachine

    def apply(self, index: int, data: bytes) -> object:
        command = decode_command(data)
        self.applying_index = index
        applied = self._state.apply(command)  # a refusal is the same on every node
        self.on_applied(applied)
        return applied

    def snapshot(self) -> bytes:
        return json.dumps(self._state.snapshot(), separators=(",", ":")).encode()

    def restore(self, index: int, data: bytes) -> None:
        self._state = MetadataState.from_snapshot(json.loads(data))
        self.on_restored()

    # ------------------------------------------------------------- proposing

    def _driver(self) -> RaftDriver:
        if self.driver is None:
            raise BrokerError(INTERNAL_ERROR, "the cluster is not started")
        return self.driver

    async def propose(self, command: Command) -> None:
        """Make `command` take effect cluster-wide; returns once applied here."""
        self._state.check(command)
        self._driver()  # 541 before the cluster started
        future: asyncio.Future[BrokerError | None] = asyncio.get_running_loop().create_future()

        def done(error: BrokerError | None) -> None:
            if not future.done():
                future.set_result(error)
        self._proposals.propose(encode_command(command), done)
        error = await future
        if error is not None:
            raise error

    async def _propose_here(self, data: bytes, timeout_s: float) -> None:
        try:
            await self._driver().propose(data, timeout_s)
        except ProposalRefused as refused:
            raise BrokerError(INTERNAL_ERROR, f"definition change refused: {refused}") from None
        except ProposalDropped:
            raise BrokerError(
                INTERNAL_ERROR, "the Raft leader stepped down (it lost its majority, or "
                "another node took over) while committing the definition change; it may or "
                "may not have taken effect (a majority of the cluster's nodes must be "
                "reachable)") from None

    async def _serve_propose(self, peer: str, envelope: Envelope) -> Envelope:
        driver = self._driver()
        if not driver.is_leader:  # certainly not applied: the sender may retry
            return Envelope("not_leader", {"leader": driver.leader_id})
        command = decode_command(envelope.blobs[0])
        self._state.check(command)
        await self._propose_here(envelope.blobs[0], self._timeout_s)
        return Envelope("ok", {"index": driver.applied_index})


class RaftProposalPorts:
    """The `ProposalDriver`'s ports on asyncio: the Raft driver, the cluster RPC."""

    def __init__(self, driver: Callable[[], RaftDriver | None], rpc: ClusterRpc,
                 propose_here: Callable[[bytes, float], Awaitable[None]], tasks: TaskSet,
                 timers: LoopTimers) -> None:
        self._driver = driver
        self._rpc = rpc
        self._propose_here = propose_here
        self._tasks = tasks
        self._timers = timers

    def leader(self) -> str | None:
        driver = self._driver()
        return driver.leader_id if driver is not None else None

    def leading(self) -> bool:
        driver = self._driver()
        return driver is not None and driver.is_leader

    def propose_here(self, data: bytes, timeout_ms: int, on_outcome: OnOutcome) -> None:
        self._tasks.spawn(outcome_of(self._here(data, timeout_ms), on_outcome))

    def forward(self, leader: str, data: bytes, timeout_ms: int,
                on_outcome: OnOutcome) -> None:
        self._tasks.spawn(outcome_of(self._forward(leader, data, timeout_ms), on_outcome))

    def wait_applied(self, index: int, timeout_ms: int, on_outcome: OnOutcome) -> None:
        self._tasks.spawn(outcome_of(self._wait(index, timeout_ms), on_outcome))

    def call_at(self, monotonic_ms: int, action: Callable[[], None]) -> None:
        self._timers.call_at(monotonic_ms, action)

    async def _here(self, data: bytes, timeout_ms: int) -> Outcome:
        await self._propose_here(data, timeout_ms / 1000)
        return Accepted()

    async def _forward(self, leader: str, data: bytes, timeout_ms: int) -> Outcome:
        answer = await self._rpc.call(leader, Envelope("metadata.propose", {}, (data,)),
                                      timeout_ms / 1000)
        if answer.op == "not_leader":
            return Retry()  # certainly not applied
        return Accepted(int(answer.header["index"]))

    async def _wait(self, index: int, timeout_ms: int) -> Outcome:
        driver = self._driver()
        if driver is None:
            return Failed(BrokerError(INTERNAL_ERROR, "the cluster is not started"))
        await driver.wait_applied(index, timeout_ms / 1000)
        return Accepted()


async def outcome_of(work: Awaitable[Outcome], on_outcome: OnOutcome) -> None:
    """Run one attempt; what it returned or raised is its outcome."""
    outcome: Outcome
    try:
        outcome = await work
    except (NotLeader, PeerUnavailable):
        outcome = Retry()  # the command did not reach a leader
    except ProposalTimeout:
        outcome = TimedOut()
    except BrokerError as error:
        outcome = Failed(error)
    except (RaftError, OSError) as error:
        outcome = Failed(BrokerError(INTERNAL_ERROR, f"definition change failed: {error}"))
    on_outcome(outcome)
