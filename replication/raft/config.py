"""Tunables of a Raft node, in ticks and counts (the core knows no wall clock)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RaftConfig:
    # A follower campaigns after a random timeout in [election_ticks, 2 * election_ticks)
    # without hearing from a leader; the spread keeps two nodes from colliding for ever.
    election_ticks: int = 10
    heartbeat_ticks: int = 1
    max_entries_per_append: int = 64
    # AppendEntries messages a leader keeps unacknowledged per follower while streaming.
    max_inflight: int = 16
    prevote: bool = True
    # A leader that has not heard from a quorum within an election timeout steps down,
    # so clients stop sending it writes it can never commit.
    check_quorum: bool = True

    def __post_init__(self) -> None:
        if self.heartbeat_ticks < 1:
            raise ValueError("heartbeat_ticks must be at least 1")
        if self.election_ticks <= self.heartbeat_ticks:
            raise ValueError("election_ticks must be larger than heartbeat_ticks")
        if self.max_entries_per_append < 1 or self.max_inflight < 1:
            raise ValueError("max_entries_per_append and max_inflight must be at least 1")
