"""`Proposals`: a simulated node's metadata proposals, both sides.

It mirrors `ReplicatedMetadata.propose` / `_serve_propose` (logbroker/cluster/
replicated_metadata.py): a command is checked against this node's state
first; on the Raft leader it is proposed there, elsewhere it is forwarded to
the leader (`Propose`), which checks it again, proposes it and answers once
the entry is applied: ok, refused by the state machine, or dropped when the
entry did not survive (another term's entry at its index, or the leader lost
its leadership first). "Not the leader" is retried (the command certainly
did not take effect), and so is having no leader, until `PROPOSE_TIMEOUT`;
a proposal whose answer never comes fails then, its outcome unknown, as the
real one does on its timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from logbroker.metadata import Command, MetadataError, MetadataState, encode_command
from logbroker.metadata import decode_command as _decode_command
from replication.raft import Entry, NotLeader, ProposalRefused, RaftNode, Role
from tests.sim.queue_messages import ClusterMessage, Propose, ProposeAnswer

PROPOSE_TIMEOUT = 30  # ticks


@lru_cache(maxsize=4096)
def decode_command(data: bytes) -> Command:
    """Commands are immutable: every node (and every replay) decodes an entry once."""
    return _decode_command(data)


class ProposalHost(Protocol):
    id: str
    raft: RaftNode | None
    state: MetadataState

    @property
    def now(self) -> int: ...

    def request_id(self) -> int: ...

    def send(self, message: ClusterMessage) -> None: ...


@dataclass
class _Proposal:
    data: bytes
    done: Callable[[bool], None] | None
    deadline: int
    next_try: int
    sent: bool = False


class Proposals:
    def __init__(self, host: ProposalHost) -> None:
        self._host = host
        self._mine: dict[int, _Proposal] = {}
        self._serving: dict[int, tuple[int, str, int]] = {}  # index -> (term, proposer, id)

    def propose(self, command: Command, done: Callable[[bool], None] | None = None) -> None:
        host = self._host
        try:
            host.state.check(command)
        except MetadataError:
            if done is not None:
                done(False)
            return
        request = host.request_id()
        self._mine[request] = _Proposal(encode_command(command), done,
                                        host.now + PROPOSE_TIMEOUT, host.now)
        self._try(request)

    def _try(self, request: int) -> None:
        proposal, raft = self._mine[request], self._host.raft
        assert raft is not None
        if raft.role is Role.LEADER:
            proposal.sent = True
            self.serve(self._host.id, request, proposal.data)
        elif raft.leader_id is not None:
            proposal.sent = True
            self._host.send(Propose(self._host.id, raft.leader_id, request, proposal.data))
        else:
            proposal.next_try = self._host.now + 1

    def serve(self, proposer: str, request: int, data: bytes) -> None:
        """The leader's side (`_serve_propose` / `_propose_here`)."""
        host = self._host
        raft = host.raft
        assert raft is not None
        if raft.role is not Role.LEADER:
            self._answer(proposer, request, False, "not_leader")
            return
        try:
            host.state.check(decode_command(data))
            index = raft.propose(data)
        except NotLeader:
            self._answer(proposer, request, False, "not_leader")
            return
        except (MetadataError, ProposalRefused) as error:
            self._answer(proposer, request, False, str(error))
            return
        self._serving[index] = (raft.term, proposer, request)

    def applied(self, entry: Entry, ok: bool, reason: str) -> None:
        """An entry was applied here: answer its proposer if this node proposed it."""
        served = self._serving.pop(entry.index, None)
        if served is not None:
            term, proposer, request = served
            if entry.term != term:
                ok, reason = False, "dropped"
            self._answer(proposer, request, ok, reason)

    def _answer(self, proposer: str, request: int, ok: bool, reason: str) -> None:
        if proposer == self._host.id:
            self.answered(request, ok, reason)
        else:
            self._host.send(ProposeAnswer(self._host.id, proposer, request, ok, reason))

    def answered(self, request: int, ok: bool, reason: str) -> None:
        proposal = self._mine.get(request)
        if proposal is None:
            return
        if not ok and reason == "not_leader":
            proposal.sent, proposal.next_try = False, self._host.now + 1  # not applied
            return
        del self._mine[request]
        if proposal.done is not None:
            proposal.done(ok)

    def leadership_lost(self) -> None:
        serving, self._serving = self._serving, {}
        for _, proposer, request in serving.values():
            self._answer(proposer, request, False, "dropped")

    def tick(self) -> None:
        now = self._host.now
        for request, proposal in list(self._mine.items()):
            if now >= proposal.deadline:
                del self._mine[request]
                if proposal.done is not None:
                    proposal.done(False)
            elif not proposal.sent and now >= proposal.next_try:
                self._try(request)
