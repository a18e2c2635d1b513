"""`ReplicatedMetadata`: the metadata state machine run on the Raft log.

Theory of operation. Every definition change is a `Command` proposed to the
Raft leader; once committed, every node applies it to its own `MetadataState`
in log order (`apply`, the `RaftStateMachine` side) and its broker reacts to
the events (`on_applied`). So all nodes hold the same definitions, and any
node answers reads from its applied state.

`propose(command)` is the client side. It checks the command against the local
state first (a refusal needs no round trip; the leader's apply is still the
judge). On the leader it proposes and waits for the entry to be applied. On
any other node it forwards the encoded command to the leader
(`metadata.propose`), which answers with its applied index once the command
took effect; the forwarding node then waits until it has applied that index
itself, so a client that declares through a follower can use the queue on
that follower at once (read-your-writes). Without a known leader it retries
until `timeout_s` and then refuses with 541 naming the cause: a minority
partition cannot change definitions, and never hangs.

Retries are only made when the command certainly did not take effect (no
leader, NotLeader, a refused link). A proposal whose outcome is unknown
(the leader lost leadership before committing it) is reported as such.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable

from logbroker.cluster.cluster_rpc import INTERNAL_ERROR, ClusterRpc, PeerUnavailable
from logbroker.cluster.envelope import Envelope
from logbroker.errors import BrokerError
from logbroker.metadata import Applied, Command, MetadataState, decode_command, encode_command
from replication.raft.driver import RaftDriver
from replication.raft.errors import NotLeader, ProposalRefused
from replication.raft.proposals import ProposalDropped, ProposalTimeout

logger = logging.getLogger(__name__)
NO_LEADER_RETRY_S = 0.05


class ReplicatedMetadata:
    def __init__(self, node_name: str, rpc: ClusterRpc, timeout_s: float = 5.0) -> None:
        self.node_name = node_name
        self._state = MetadataState()
        self._rpc = rpc
        self._timeout_s = timeout_s
        self.driver: RaftDriver | None = None
        self.on_applied: Callable[[Applied], None] = lambda applied: None
        self.applying_index = 0  # the entry being applied (or last applied)
        self.on_restored: Callable[[], None] = lambda: None
        rpc.handle("metadata.propose", self._serve_propose)

    @property
    def state(self) -> MetadataState:
        return self._state

    def close(self) -> None:
        pass  # the Raft driver owns the log and is stopped by the cluster node

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
        data = encode_command(command)
        deadline = time.monotonic() + self._timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrokerError(INTERNAL_ERROR, self._no_quorum_text())
            driver = self._driver()
            leader = driver.leader_id
            try:
                if driver.is_leader:
                    await self._propose_here(data, remaining)
                    return
                if leader is not None:
                    answer = await self._rpc.call(
                        leader, Envelope("metadata.propose", {}, (data,)), remaining)
                    if answer.op == "not_leader":
                        raise NotLeader(leader, answer.header.get("leader"))
                    await driver.wait_applied(int(answer.header["index"]),
                                              max(0.001, deadline - time.monotonic()))
                    return
            except (NotLeader, PeerUnavailable):
                pass  # the command did not reach a leader: try again
            except ProposalTimeout:
                raise BrokerError(INTERNAL_ERROR, self._no_quorum_text()) from None
            await asyncio.sleep(NO_LEADER_RETRY_S)

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

    def _no_quorum_text(self) -> str:
        leader = self.driver.leader_id if self.driver is not None else None
        where = f"the Raft leader {leader} did not commit it" if leader else "no Raft leader"
        return (f"definitions cannot change now: {where} within {self._timeout_s:g} s "
                f"(a majority of the cluster's nodes must be reachable)")
