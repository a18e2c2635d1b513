"""Safety checkers for the Raft simulation: they watch every node after every event.

- election safety: at most one leader per term, and no voter grants two
  candidates in one term (even across a crash);
- log matching: two logs that hold an entry of the same index and term agree
  on every entry up to it (checked pairwise, periodically and at the end);
- leader completeness: an entry that a leader of term T saw committed is in the
  log of every leader of a term after T;
- state-machine safety: every node applies, at each index, the entry that the
  leaders committed there, in index order with no gap, and a snapshot holds
  exactly the commands committed up to its index.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replication.raft import Entry, EntryKind, RaftNode, Role, Snapshot
from replication.raft.messages import Message, RequestVoteResponse


class InvariantViolation(AssertionError):
    pass


def encode_commands(commands: list[bytes]) -> bytes:
    return b"\n".join(commands)


def decode_commands(data: bytes) -> list[bytes]:
    return data.split(b"\n") if data else []


@dataclass
class SafetyChecker:
    leaders: dict[int, str] = field(default_factory=dict)
    votes: dict[tuple[str, int], str] = field(default_factory=dict)
    # index -> (term, kind, data) of the entry committed there, and the term of
    # the first leader seen committing it (it was committed in that term or earlier).
    committed: dict[int, tuple[int, EntryKind, bytes]] = field(default_factory=dict)
    commit_term: dict[int, int] = field(default_factory=dict)
    commands: dict[int, bytes] = field(default_factory=dict)
    # leader -> (its term, the commit index already recorded)
    _leader_commit: dict[str, tuple[int, int]] = field(default_factory=dict)

    def founded(self, entry: Entry) -> None:
        """The founding entry is committed by construction, before any leader."""
        self.committed[entry.index] = (entry.term, entry.kind, entry.data)
        self.commit_term[entry.index] = entry.term

    def observe(self, node: RaftNode) -> None:
        """Call after anything that may change `node`'s role or commit index."""
        tracked = self._leader_commit.get(node.id)
        if node.role is not Role.LEADER:
            if tracked is not None:
                # A leader that commits its own removal steps down in the same
                # step: what it committed until then still counts.
                del self._leader_commit[node.id]
                if tracked[0] == node.term:
                    self._record_commits(node, tracked[1])
            return
        holder = self.leaders.setdefault(node.term, node.id)
        if holder != node.id:
            raise InvariantViolation(f"two leaders in term {node.term}: {holder} and {node.id}")
        if tracked is None or tracked[0] != node.term:
            self._check_complete(node)
            tracked = (node.term, node.raft_log.snapshot_index)
        self._record_commits(node, tracked[1])
        self._leader_commit[node.id] = (node.term, node.raft_log.commit_index)

    def _record_commits(self, node: RaftNode, seen: int) -> None:
        log = node.raft_log
        for index in range(max(seen, log.snapshot_index) + 1, log.commit_index + 1):
            self._record_commit(node, log.entry(index))

    def _record_commit(self, node: RaftNode, entry: Entry) -> None:
        value = (entry.term, entry.kind, entry.data)
        known = self.committed.setdefault(entry.index, value)
        if known != value:
            raise InvariantViolation(
                f"{node.id} (leader, term {node.term}) committed {value} at {entry.index}, "
                f"but {known} was committed there before"
            )
        self.commit_term.setdefault(entry.index, node.term)
        if entry.kind is EntryKind.NORMAL:
            self.commands[entry.index] = entry.data

    def _check_complete(self, node: RaftNode) -> None:
        log = node.raft_log
        for index, term in self.commit_term.items():
            if term >= node.term or index <= log.snapshot_index:
                continue
            if log.term_at(index) != self.committed[index][0]:
                raise InvariantViolation(
                    f"{node.id} leads term {node.term} without entry {index} "
                    f"committed in term {term} (it has term {log.term_at(index)})"
                )

    def on_sent(self, message: Message) -> None:
        if isinstance(message, RequestVoteResponse) and message.granted:
            key = (message.source, message.term)
            granted_to = self.votes.setdefault(key, message.target)
            if granted_to != message.target:
                raise InvariantViolation(
                    f"{message.source} voted for {granted_to} and {message.target} "
                    f"in term {message.term}"
                )

    def on_apply(self, node_id: str, applied_index: int, entry: Entry) -> None:
        if entry.index != applied_index + 1:
            raise InvariantViolation(
                f"{node_id} applied entry {entry.index} after {applied_index}"
            )
        known = self.committed.get(entry.index)
        value = (entry.term, entry.kind, entry.data)
        if known is None:
            raise InvariantViolation(
                f"{node_id} applied {value} at {entry.index}, which no leader committed"
            )
        if known != value:
            raise InvariantViolation(
                f"{node_id} applied {value} at {entry.index}, but {known} was committed"
            )

    def on_snapshot(self, node_id: str, snapshot: Snapshot) -> None:
        expected = [data for index, data in sorted(self.commands.items())
                    if index <= snapshot.index]
        got = decode_commands(snapshot.data)
        if got != expected:
            raise InvariantViolation(
                f"{node_id} installed a snapshot at {snapshot.index} holding {len(got)} "
                f"commands; {len(expected)} were committed up to there"
            )


def check_log_matching(nodes: dict[str, RaftNode]) -> None:
    """Pairwise: below the last index where two logs agree on the term, they are equal."""
    ids = sorted(nodes)
    for position, a in enumerate(ids):
        for b in ids[position + 1 :]:
            _check_pair(a, nodes[a], b, nodes[b])


def _check_pair(a: str, node_a: RaftNode, b: str, node_b: RaftNode) -> None:
    log_a, log_b = node_a.raft_log, node_b.raft_log
    lo = max(log_a.first_index, log_b.first_index)
    hi = min(log_a.last_index, log_b.last_index)
    index = hi
    while index >= lo and log_a.term_at(index) != log_b.term_at(index):
        index -= 1
    for at in range(lo, index + 1):
        if log_a.entry(at) != log_b.entry(at):
            raise InvariantViolation(
                f"logs of {a} and {b} agree on the term at {index} but differ at {at}: "
                f"{log_a.entry(at)} vs {log_b.entry(at)}"
            )
