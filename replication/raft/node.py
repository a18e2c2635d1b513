"""`RaftNode`: one member of a Raft group, as a pure state machine (after etcd-io/raft).

Theory of operation. The node does no I/O and reads no clock. The shell feeds
it `tick()` (logical time), `step(message)` (a message received) and
`propose(...)` (a client's command); the node answers with a `Ready` batch of
effects: state and entries to persist, messages to send, committed entries to
apply. The shell carries them out in the order `ready.py` gives and calls
`advance(ready)`. Randomness (election timeouts) comes from the injected
`random.Random`, so a seed replays a whole cluster exactly.

Roles. A follower that hears from no leader for a randomized election timeout
first runs a pre-vote: it asks the voters whether they *would* vote for it in
the next term, changing nobody's state. Only with a majority of yes does it
become a candidate, bump its term and ask for real votes. A voter that heard
from a leader within the election timeout says no to pre-votes (and, with
check-quorum, ignores real vote requests), so a node coming back from a
partition cannot depose a healthy leader. A candidate with a majority becomes
leader and appends a no-op entry of its term; see `leader.py` for replication
and commitment, `follower.py` for the follower's side.

Terms. Every message carries its sender's term. A higher term makes the
receiver a follower in that term (pre-votes excepted); a lower one is ignored,
except that a stale leader's appends and pre-votes are answered, so the stale
sender learns the newer term.

Replication. The leader streams entries to each member from its `next_index`
(pacing in `progress.py`), sends the snapshot instead when those entries are
compacted (`compact`), and commits what a majority of voters persisted once an
entry of its own term is among it. Learners are sent everything but never
counted. With check-quorum, a leader that has not heard from a majority for an
election timeout steps down. `transfer_leadership` catches a voter up and tells
it to campaign at once (TimeoutNow), past the others' lease.

Layout: `RaftCore` (core.py) is the protocol - terms, roles, message
handling; `RaftNode` adds construction from persisted state, the client API
(proposals, membership changes, compaction) and the Ready/advance hand-off.

Invariants (checked by tests/sim):
- election safety: at most one leader per term (a node votes once per term,
  and the vote is persisted before the response is sent);
- log matching: two logs holding an entry of the same index and term agree on
  every entry up to it (appends are accepted only after the consistency check
  on `prev_log_index`/`prev_log_term`);
- leader completeness: a committed entry is in the log of every later leader
  (a voter grants only to candidates at least as up to date as itself, and a
  leader commits by counting only entries of its own term);
- state-machine safety: no two nodes apply different entries at one index;
- membership changes are single-server and effective when appended; at most
  one is uncommitted, and a leader proposes one only after it has committed
  an entry of its own term.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replication.raft.config import RaftConfig
from replication.raft.core import RaftCore
from replication.raft.errors import NotLeader, ProposalRefused
from replication.raft.follower import record_configs
from replication.raft.leader import Leader
from replication.raft.log_store import RaftLog
from replication.raft.membership import (
    EMPTY_MEMBERSHIP,
    ConfigChange,
    ConfigChangeError,
    ConfigHistory,
    Membership,
)
from replication.raft.messages import Entry, EntryKind, Snapshot
from replication.raft.ready import HardState, PersistedState, Ready

if TYPE_CHECKING:
    import random  # the injected generator's type: the caller seeds it


class RaftNode(RaftCore):
    def __init__(
        self,
        node_id: str,
        peers: Membership,
        config: RaftConfig,
        rng: random.Random,
        restored: PersistedState | None = None,
    ) -> None:
        """`peers` founds a new group (every founder must be given the same); a node
        joining an existing group passes EMPTY_MEMBERSHIP and learns it from the
        leader. With `restored`, the persisted state wins and `peers` is unused."""
        if restored is None:
            log, history, hard_state = _founding_state(peers)
            super().__init__(node_id, config, rng, log, history, hard_state, None)
            self._persisted = HardState()
        else:
            log, history = _restored_log(restored)
            super().__init__(node_id, config, rng, log, history, restored.hard_state,
                             restored.snapshot)
            self._persisted = restored.hard_state
        self._outstanding: Ready | None = None
        self._last_soft = self._soft_state()

    # ----------------------------------------------------- proposals, compaction

    def propose(self, data: bytes) -> int:
        """Append a command on the leader; its index. Raises NotLeader elsewhere.

        The command is committed when it comes back in `committed_entries` at
        that index *with this node's current term*; another entry there means
        it was lost with this node's leadership.
        """
        return self._append_own(self._require_leader(), EntryKind.NORMAL, data)

    def propose_config_change(self, change: ConfigChange) -> int:
        leader = self._require_leader()
        if self._history.latest_index > self._log.commit_index:
            raise ProposalRefused(
                f"the config change at {self._history.latest_index} is not committed yet"
            )
        if self._log.commit_index < self._leader_first_index:
            raise ProposalRefused("the leader has not yet committed an entry of its term")
        membership = self._history.latest.apply(change)
        return self._append_own(leader, EntryKind.CONFIG, membership.encode())

    def transfer_leadership(self, target: str) -> None:
        """Hand leadership to voter `target` once it has the whole log (best effort:
        abandoned after an election timeout). Proposals are refused meanwhile."""
        if self._leader is None:
            raise NotLeader(self._id, self._leader_id)
        if target == self._id:
            return
        if target not in self._history.latest.voters:
            raise ConfigChangeError(f"{target} is not a voter")
        self._leader.transfer(target)

    def _require_leader(self) -> Leader:
        if self._leader is None:
            raise NotLeader(self._id, self._leader_id)
        if self._leader.transferee is not None:
            raise ProposalRefused(f"leadership is moving to {self._leader.transferee}")
        return self._leader

    def compact(self, applied_index: int, snapshot_data: bytes) -> Snapshot:
        """Drop the log up to `applied_index`, now that `snapshot_data` stands for it.

        The shell persists the returned snapshot (`RaftStorage.save_snapshot`).
        Followers that need compacted entries will be sent it.
        """
        if not self._log.snapshot_index < applied_index <= self._log.applied_index:
            raise ValueError(
                f"cannot snapshot at {applied_index}: the log is compacted to "
                f"{self._log.snapshot_index} and applied to {self._log.applied_index}"
            )
        membership = self._history.at(applied_index)
        self._log.compact(applied_index)
        self._history.compact_to(applied_index)
        self._snapshot = Snapshot(applied_index, self._log.snapshot_term, membership,
                                  snapshot_data)
        return self._snapshot

    # ------------------------------------------------------------------ ready

    def has_ready(self) -> bool:
        if self._outstanding is not None:
            return False
        log = self._log
        return bool(
            self._outbox
            or self._pending_snapshot is not None
            or log.stable_index < log.last_index
            or log.applied_index < log.commit_index
            or self._hard_state() != self._persisted
            or self._soft_state() != self._last_soft
        )

    def ready(self) -> Ready:
        """The effects to carry out now; call `advance` with it when done."""
        if self._outstanding is not None:
            raise RuntimeError("advance() the previous Ready first")
        hard, soft = self._hard_state(), self._soft_state()
        entries = tuple(self._log.unstable_entries())
        vote_changed = (hard.term, hard.vote) != (self._persisted.term, self._persisted.vote)
        ready = Ready(
            hard_state=hard if hard != self._persisted else None,
            entries=entries,
            snapshot=self._pending_snapshot,
            messages=tuple(self._outbox),
            committed_entries=tuple(self._log.entries_to_apply()),
            soft_state=soft if soft != self._last_soft else None,
            must_sync=bool(entries or self._pending_snapshot is not None or vote_changed),
        )
        self._outbox.clear()
        self._last_soft = soft
        self._outstanding = ready
        return ready

    def advance(self, ready: Ready) -> None:
        """The shell has persisted, sent and applied `ready`."""
        if ready is not self._outstanding:
            raise RuntimeError("advance() takes the Ready that ready() returned last")
        self._outstanding = None
        if ready.hard_state is not None:
            self._persisted = ready.hard_state
        if ready.snapshot is not None and ready.snapshot is self._pending_snapshot:
            self._pending_snapshot = None
        if ready.entries:
            last = ready.entries[-1]
            self._log.stable_to(last.index, last.term)
        if ready.committed_entries:
            self._log.applied_to(ready.committed_entries[-1].index)


def _founding_state(peers: Membership) -> tuple[RaftLog, ConfigHistory, HardState]:
    log = RaftLog()
    history = ConfigHistory(0, EMPTY_MEMBERSHIP)
    if not peers.nodes:
        return log, history, HardState()
    # Every founder writes this same committed first entry, so all logs agree
    # from the start and a node added later receives the membership with the log.
    log.append([Entry(term=1, index=1, kind=EntryKind.CONFIG, data=peers.encode())])
    history.record(1, peers)
    log.commit_to(1)
    return log, history, HardState(term=1, commit=1)


def _restored_log(restored: PersistedState) -> tuple[RaftLog, ConfigHistory]:
    snapshot, commit = restored.snapshot, restored.hard_state.commit
    if snapshot is None:
        log = RaftLog(0, 0, restored.entries, commit)
        history = ConfigHistory(0, EMPTY_MEMBERSHIP)
    else:
        log = RaftLog(snapshot.index, snapshot.term, restored.entries, commit)
        history = ConfigHistory(snapshot.index, snapshot.membership)
    record_configs(history, restored.entries)
    return log, history
