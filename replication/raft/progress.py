"""What a leader knows about each follower's log, and how it paces replication.

Each follower's `Progress` is in one of three states (as in etcd-io/raft):

- PROBE: the leader does not know where the follower's log matches its own.
  It sends one AppendEntries at a time, at most one per heartbeat, and moves
  `next_index` back on each rejection using the follower's hint.
- REPLICATE: the last append matched; the leader streams entries, moving
  `next_index` ahead optimistically, with at most `max_inflight` messages
  unacknowledged. A rejection means a message was lost or reordered: back to
  PROBE. So does an answer to a heartbeat sent after the oldest unacknowledged
  append: on an ordered link that append (or its answer) was lost.
- SNAPSHOT: the entries the follower needs are compacted; an InstallSnapshot
  is in flight. If nothing comes back within an election timeout the leader
  probes again, which leads to a new snapshot if the follower still needs one.

Invariant: `match_index < next_index`. `match_index` only grows while the
leader leads (the follower acknowledged persisting it, and entries matching
the leader's log are never truncated in its term).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum


class ProgressState(Enum):
    PROBE = "probe"
    REPLICATE = "replicate"
    SNAPSHOT = "snapshot"


@dataclass
class Progress:
    match_index: int = 0
    next_index: int = 1
    state: ProgressState = ProgressState.PROBE
    # PROBE: an append is out and unanswered; the next waits for a heartbeat response.
    probe_sent: bool = False
    # REPLICATE: (last index, heartbeat round when sent) of each unacknowledged
    # append, oldest first.
    inflight: deque[tuple[int, int]] = field(default_factory=deque)
    pending_snapshot: int = 0
    ticks_since_snapshot: int = 0
    # Heard from since the last check-quorum round.
    recent_active: bool = False
    # The highest commit index sent in an append, so an idle follower learns a
    # newer one without waiting for a heartbeat.
    sent_commit: int = 0

    def is_paused(self, max_inflight: int) -> bool:
        if self.state is ProgressState.PROBE:
            return self.probe_sent
        if self.state is ProgressState.REPLICATE:
            return len(self.inflight) >= max_inflight
        return True

    def become_probe(self) -> None:
        self.next_index = self.match_index + 1
        self._reset(ProgressState.PROBE)

    def become_replicate(self) -> None:
        self.next_index = self.match_index + 1
        self._reset(ProgressState.REPLICATE)

    def become_snapshot(self, snapshot_index: int) -> None:
        self._reset(ProgressState.SNAPSHOT)
        self.pending_snapshot = snapshot_index

    def _reset(self, state: ProgressState) -> None:
        self.state = state
        self.probe_sent = False
        self.inflight.clear()
        self.pending_snapshot = 0
        self.ticks_since_snapshot = 0

    def sent_entries(self, last_index: int | None, heartbeat_round: int) -> None:
        """An append went out; `last_index` is its last entry (None if it carried none)."""
        if self.state is ProgressState.REPLICATE and last_index is not None:
            self.next_index = last_index + 1
            self.inflight.append((last_index, heartbeat_round))
        elif self.state is ProgressState.PROBE:
            self.probe_sent = True

    def acknowledge(self, index: int) -> bool:
        """The follower matches up to `index`; True if that is news."""
        self.probe_sent = False
        while self.inflight and self.inflight[0][0] <= index:
            self.inflight.popleft()
        if index <= self.match_index:
            return False
        self.match_index = index
        self.next_index = max(self.next_index, index + 1)
        return True

    def lost_append(self, heartbeat_round: int) -> bool:
        """Was the oldest unacknowledged append sent before heartbeat `heartbeat_round`?"""
        return bool(self.inflight) and self.inflight[0][1] < heartbeat_round

    def reject(self, reject_index: int, next_guess: int) -> bool:
        """The follower lacks `reject_index`; False if the rejection is stale."""
        if self.state is ProgressState.SNAPSHOT:
            return False  # answers an append sent before the snapshot
        if self.state is ProgressState.REPLICATE:
            if reject_index <= self.match_index:
                return False  # an older message, overtaken by an acknowledged one
            self.become_probe()
        elif reject_index != self.next_index - 1:
            return False  # answers an earlier probe
        self.next_index = max(min(next_guess, reject_index), self.match_index + 1)
        self.probe_sent = False
        return True


def quorum_index(matches: Mapping[str, int], voters: Iterable[str]) -> int:
    """The largest index that a majority of `voters` have (0 for a voterless group)."""
    ranked = sorted((matches.get(voter, 0) for voter in voters), reverse=True)
    if not ranked:
        return 0
    return ranked[len(ranked) // 2]


class VoteResult(Enum):
    WON = "won"
    LOST = "lost"
    PENDING = "pending"


def tally(votes: Mapping[str, bool], voters: Iterable[str]) -> VoteResult:
    """The outcome of an election among `voters`, given the answers so far."""
    voter_list = list(voters)
    quorum = len(voter_list) // 2 + 1
    granted = sum(1 for voter in voter_list if votes.get(voter) is True)
    rejected = sum(1 for voter in voter_list if votes.get(voter) is False)
    if granted >= quorum:
        return VoteResult.WON
    if rejected > len(voter_list) - quorum:
        return VoteResult.LOST
    return VoteResult.PENDING
