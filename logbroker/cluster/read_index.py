"""`ReadIndex`: whether this node's applied metadata is as new as the cluster's (pure).

Theory of operation. A node must not act on an old record (open a queue for
an epoch that has ended) while it replays its log after a restart. A Raft
leader knows its metadata is current once it committed an entry of its own
term and applied up to its commit index. A follower's own commit index may be
far behind the leader's, so it asks the leader for its commit index (Raft's
read index, `metadata.read_index`) once per leader, and is current once it
applied that much.

Invariants:
- without a known leader, nothing is current;
- a commit index counts only if the leader that gave it is still the leader
  (a new term forgets it: `leader_changed`);
- at most one question in flight; an unanswered one is asked again (`want`)
  once its answer came back empty.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AskReadIndex:
    """Ask `leader` its commit index; answer with `answered(request, leader, commit)`."""

    request: int
    leader: str


@dataclass(frozen=True, slots=True)
class RaftPosition:
    """What this node's Raft says of itself."""

    leader: str | None
    leading: bool
    committed_own_term: bool  # as leader: its commit index is the cluster's
    commit_index: int
    applied: int  # applied (or being applied) here


class ReadIndex:
    def __init__(self) -> None:
        self._confirmed: int | None = None
        self._asked: AskReadIndex | None = None
        self._last_request = 0

    @property
    def confirmed(self) -> int | None:
        return self._confirmed

    def leader_changed(self) -> None:
        """A new term: what an earlier leader said proves nothing now."""
        self._confirmed = None
        self._asked = None

    def want(self, raft: RaftPosition) -> AskReadIndex | None:
        """The question to ask now, if any."""
        if (self._confirmed is not None or self._asked is not None or raft.leading
                or raft.leader is None):
            return None
        self._last_request += 1
        self._asked = AskReadIndex(self._last_request, raft.leader)
        return self._asked

    def answered(self, request: int, leader_now: str | None, commit: int | None) -> bool:
        """The leader's answer (`commit` None: none came); True when it counts."""
        asked = self._asked
        if asked is None or asked.request != request:
            return False  # asked before a new term
        self._asked = None
        if commit is None or leader_now != asked.leader:
            return False
        self._confirmed = commit
        return True

    def current(self, raft: RaftPosition) -> bool:
        if raft.leader is None:
            return False
        if raft.leading:
            return raft.committed_own_term and raft.applied >= raft.commit_index
        return self._confirmed is not None and raft.applied >= self._confirmed
