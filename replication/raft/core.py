"""`RaftCore`: the Raft protocol itself - terms, roles, elections, and the glue
between the leader's and the followers' halves (`leader.py`, `follower.py`).

`RaftNode` (node.py) adds construction from persisted state and the
`Ready`/`advance` hand-off to the shell; the theory of operation and the
invariants are described there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replication.raft.config import RaftConfig
from replication.raft.errors import InvariantError
from replication.raft.follower import (
    handle_append,
    handle_heartbeat,
    handle_snapshot,
    record_configs,
)
from replication.raft.leader import Leader
from replication.raft.log_store import RaftLog
from replication.raft.membership import (
    ConfigHistory,
    Membership,
)
from replication.raft.messages import (
    AppendEntries,
    AppendEntriesResponse,
    Entry,
    EntryKind,
    Heartbeat,
    HeartbeatResponse,
    InstallSnapshot,
    InstallSnapshotResponse,
    Message,
    PreVote,
    PreVoteResponse,
    RequestVote,
    RequestVoteResponse,
    Snapshot,
    TimeoutNow,
)
from replication.raft.progress import VoteResult, tally
from replication.raft.ready import HardState, Role, SoftState

if TYPE_CHECKING:
    import random  # the injected generator's type: the caller seeds it

_FROM_LEADER = (AppendEntries, Heartbeat, InstallSnapshot)


class RaftCore:
    def __init__(
        self,
        node_id: str,
        config: RaftConfig,
        rng: random.Random,
        log: RaftLog,
        history: ConfigHistory,
        hard_state: HardState,
        snapshot: Snapshot | None,
    ) -> None:
        self._id = node_id
        self._config = config
        self._rng = rng
        self._log = log
        self._history = history
        self._snapshot = snapshot
        self._term, self._vote = hard_state.term, hard_state.vote
        if log.last_term > self._term:
            # A crash between persisting entries and the hard state that adopted
            # their term: we never voted in that term, or the vote would be durable.
            self._term, self._vote = log.last_term, None
        self._outbox: list[Message] = []
        self._role = Role.FOLLOWER
        self._leader_id: str | None = None
        self._leader: Leader | None = None
        self._votes: dict[str, bool] = {}
        self._election_elapsed = 0
        self._randomized_timeout = config.election_ticks
        # A snapshot received from the leader, to persist and hand to the application.
        self._pending_snapshot: Snapshot | None = None
        self._leader_first_index = 0
        self._reset_election_timer()

    # ------------------------------------------------------------ properties

    @property
    def id(self) -> str:
        return self._id

    @property
    def config(self) -> RaftConfig:
        return self._config

    @property
    def term(self) -> int:
        return self._term

    @property
    def vote(self) -> str | None:
        return self._vote

    @property
    def role(self) -> Role:
        return self._role

    @property
    def leader_id(self) -> str | None:
        return self._leader_id

    @property
    def membership(self) -> Membership:
        """The latest membership in the log, committed or not: the one in force."""
        return self._history.latest

    @property
    def raft_log(self) -> RaftLog:
        """The node's log; read it, never change it."""
        return self._log

    @property
    def snapshot(self) -> Snapshot | None:
        """The latest snapshot the log starts from (None before any compaction)."""
        return self._snapshot

    @property
    def commit_index(self) -> int:
        return self._log.commit_index

    @property
    def membership_committed(self) -> bool:
        """Whether the latest membership is committed, as far as this node knows: an
        uncommitted config naming this node can still be cut from its log."""
        return self._history.latest_index <= self._log.commit_index

    @property
    def committed_own_term(self) -> bool:
        """A leader whose commit index is known to be the cluster's: an entry of its own
        term (the no-op it appended on taking over) is committed."""
        return self._leader is not None and self._log.commit_index >= self._leader_first_index

    @property
    def transfer_target(self) -> str | None:
        """On a leader handing over, the voter it hands to (proposals are refused meanwhile)."""
        return self._leader.transferee if self._leader is not None else None

    def match_index(self, peer: str) -> int | None:
        """On a leader, how far `peer`'s log is known to match (None if not tracked)."""
        progress = self._leader.progress.get(peer) if self._leader is not None else None
        return progress.match_index if progress is not None else None

    # ------------------------------------------------------------------ time

    def tick(self) -> None:
        self._election_elapsed += 1
        if self._leader is not None:
            self._tick_leader(self._leader)
        elif self._election_elapsed >= self._randomized_timeout and self._promotable():
            self._start_election(transfer=False)

    def _tick_leader(self, leader: Leader) -> None:
        if self._election_elapsed >= self._config.election_ticks:
            self._election_elapsed = 0
            if not leader.quorum_active() and self._config.check_quorum:
                self._become_follower(self._term, None)
                return
        leader.tick()

    def _in_lease(self) -> bool:
        """Heard from a live leader within the election timeout (or we are it)."""
        return self._leader_id is not None and self._election_elapsed < self._config.election_ticks

    def _promotable(self) -> bool:
        return self._id in self._history.latest.voters

    def _reset_election_timer(self) -> None:
        self._election_elapsed = 0
        ticks = self._config.election_ticks
        self._randomized_timeout = self._rng.randrange(ticks, 2 * ticks)

    # -------------------------------------------------------------- messages

    def step(self, m: Message) -> None:
        if m.target != self._id:
            raise ValueError(f"{self._id} received a message for {m.target}")
        if m.term > self._term:
            if not self._adopt_higher_term(m):
                return
        elif m.term < self._term:
            self._answer_stale(m)
            return
        self._dispatch(m)

    def _adopt_higher_term(self, m: Message) -> bool:
        """Follow `m`'s newer term if it calls for it; False to drop `m`."""
        if isinstance(m, PreVote) or (isinstance(m, PreVoteResponse) and m.granted):
            return True  # they speak of a term not yet started: no state changes
        if (isinstance(m, RequestVote) and not m.transfer and self._config.check_quorum
                and self._in_lease()):
            return False  # a live leader exists; a stray candidate must not depose it
        self._become_follower(m.term, m.source if isinstance(m, _FROM_LEADER) else None)
        return True

    def _answer_stale(self, m: Message) -> None:
        if isinstance(m, _FROM_LEADER):
            # A deposed leader: our newer term in the reply makes it step down.
            self._send(HeartbeatResponse(source=self._id, target=m.source, term=self._term))
        elif isinstance(m, PreVote):
            self._send(PreVoteResponse(
                source=self._id, target=m.source, term=self._term, granted=False
            ))

    def _dispatch(self, m: Message) -> None:
        match m:
            case PreVote() | RequestVote():
                self._on_vote_request(m)
            case PreVoteResponse() | RequestVoteResponse():
                self._on_vote_response(m)
            case AppendEntries() | Heartbeat() | InstallSnapshot():
                self._on_from_leader(m)
            case TimeoutNow() if self._promotable():
                self._start_election(transfer=True)
            case AppendEntriesResponse() | HeartbeatResponse() | InstallSnapshotResponse():
                if self._leader is not None:
                    self._on_response(self._leader, m)

    def _on_vote_request(self, m: PreVote | RequestVote) -> None:
        prevote = isinstance(m, PreVote)
        can_vote = (
            self._vote == m.source
            or (self._vote is None and self._leader_id is None)
            or (prevote and m.term > self._term)
        )
        granted = (
            can_vote
            and not (prevote and self._in_lease())
            and self._log.is_up_to_date(m.last_log_index, m.last_log_term)
        )
        if granted and not prevote:
            self._vote = m.source
            self._election_elapsed = 0
        term = m.term if granted else self._term
        if prevote:
            self._send(PreVoteResponse(source=self._id, target=m.source, term=term,
                                       granted=granted))
        else:
            self._send(RequestVoteResponse(source=self._id, target=m.source, term=term,
                                           granted=granted))

    def _on_vote_response(self, m: PreVoteResponse | RequestVoteResponse) -> None:
        prevote = isinstance(m, PreVoteResponse)
        if self._role is not (Role.PRE_CANDIDATE if prevote else Role.CANDIDATE):
            return
        if prevote and m.granted and m.term != self._term + 1:
            return  # from an earlier pre-vote round
        self._votes[m.source] = m.granted
        result = tally(self._votes, self._history.latest.voters)
        if result is VoteResult.WON:
            if prevote:
                self._become_candidate(transfer=False)
            else:
                self._become_leader()
        elif result is VoteResult.LOST:
            self._become_follower(self._term, None)

    def _on_from_leader(self, m: AppendEntries | Heartbeat | InstallSnapshot) -> None:
        if self._role is Role.LEADER:
            raise InvariantError(f"two leaders in term {self._term}: {self._id} and {m.source}")
        if self._role is not Role.FOLLOWER:
            self._become_follower(self._term, m.source)
        self._leader_id = m.source
        self._election_elapsed = 0
        match m:
            case AppendEntries():
                self._send(handle_append(self._log, self._history, m))
            case Heartbeat():
                self._send(handle_heartbeat(self._log, m))
            case InstallSnapshot():
                response, installed = handle_snapshot(self._log, self._history, m)
                if installed:
                    self._snapshot = self._pending_snapshot = m.snapshot
                self._send(response)

    def _on_response(
        self,
        leader: Leader,
        m: AppendEntriesResponse | HeartbeatResponse | InstallSnapshotResponse,
    ) -> None:
        if isinstance(m, AppendEntriesResponse):
            committed = leader.on_append_response(m)
        elif isinstance(m, InstallSnapshotResponse):
            committed = leader.on_snapshot_response(m)
        else:
            leader.on_heartbeat_response(m)
            committed = False
        if committed:
            self._after_commit(leader)

    def _after_commit(self, leader: Leader) -> None:
        leader.broadcast_commit()
        membership = self._history.latest
        if self._history.latest_index <= self._log.commit_index and (
            self._id not in membership.voters
        ):
            # Our removal (or demotion) is committed: hand over and stop leading.
            successor = leader.most_up_to_date_voter()
            if successor is not None:
                self._send(TimeoutNow(source=self._id, target=successor, term=self._term))
            self._become_follower(self._term, None)

    def _send(self, message: Message) -> None:
        self._outbox.append(message)

    # ----------------------------------------------------------------- roles

    def campaign(self) -> None:
        """Start an election now instead of waiting for the timer."""
        if self._role is not Role.LEADER and self._promotable():
            self._start_election(transfer=False)

    def _start_election(self, transfer: bool) -> None:
        if self._config.prevote and not transfer:
            self._set_role(Role.PRE_CANDIDATE, None)
            self._request_votes(prevote=True, transfer=False)
        else:
            self._become_candidate(transfer)

    def _become_candidate(self, transfer: bool) -> None:
        self._term += 1
        self._vote = self._id
        self._set_role(Role.CANDIDATE, None)
        self._request_votes(prevote=False, transfer=transfer)

    def _request_votes(self, prevote: bool, transfer: bool) -> None:
        voters = self._history.latest.voters
        self._votes = {self._id: True}
        if tally(self._votes, voters) is VoteResult.WON:
            if prevote:
                self._become_candidate(transfer)
            else:
                self._become_leader()
            return
        last_index, last_term = self._log.last_index, self._log.last_term
        for voter in sorted(voters - {self._id}):
            if prevote:
                self._send(PreVote(source=self._id, target=voter, term=self._term + 1,
                                   last_log_index=last_index, last_log_term=last_term))
            else:
                self._send(RequestVote(source=self._id, target=voter, term=self._term,
                                       last_log_index=last_index, last_log_term=last_term,
                                       transfer=transfer))

    def _become_follower(self, term: int, leader_id: str | None) -> None:
        if term > self._term:
            self._term = term
            self._vote = None
        self._set_role(Role.FOLLOWER, leader_id)

    def _become_leader(self) -> None:
        self._set_role(Role.LEADER, self._id)
        leader = self._leader = Leader(self, self._outbox)
        self._leader_first_index = self._log.last_index + 1
        self._append_own(leader, EntryKind.NOOP, b"")

    def _set_role(self, role: Role, leader_id: str | None) -> None:
        self._role = role
        self._leader_id = leader_id
        self._leader = None
        self._votes = {}
        self._reset_election_timer()

    # ------------------------------------------------------------- proposals

    def _append_own(self, leader: Leader, kind: EntryKind, data: bytes) -> int:
        entry = Entry(self._term, self._log.last_index + 1, kind, data)
        self._log.append([entry])
        if kind is EntryKind.CONFIG:
            record_configs(self._history, [entry])
            leader.sync_members()
        leader.broadcast_append()
        if leader.maybe_commit():
            self._after_commit(leader)
        return entry.index

    def _hard_state(self) -> HardState:
        return HardState(self._term, self._vote, self._log.commit_index)

    def _soft_state(self) -> SoftState:
        return SoftState(self._leader_id, self._role)
