"""Why a Raft node refused a request."""

from __future__ import annotations


class RaftError(Exception):
    pass


class NotLeader(RaftError):
    """Only the leader accepts proposals; `leader_hint` is who this node thinks leads."""

    def __init__(self, node_id: str, leader_hint: str | None) -> None:
        where = f"; try {leader_hint}" if leader_hint is not None else "; no leader known"
        super().__init__(f"{node_id} is not the leader{where}")
        self.leader_hint = leader_hint


class ProposalRefused(RaftError):
    """The leader cannot take this proposal now (a transfer or a config change is pending)."""


class InvariantError(AssertionError):
    """A request would break a Raft invariant: a bug in the caller or in the core."""
