"""`LeaseKeeper`: who renews, lapses and restores this node's `LeaderLease` (pure).

Theory of operation. The lease's rules are `LeaderLease`'s (leader_lease.py:
valid while renewed within `lease_ms`, lapsed when read late, restored only
by proof taken after the lapse). This core decides, from the events the
node's shell feeds it, when each rule applies:

- `heard(source, term, raft, now_ms)`: a Raft message was stepped. As the
  Raft leader, a voter's answer in the leader's own term is remembered (a
  lapsed lease is restored at once if a quorum now proves it); otherwise a
  message from the Raft leader renews the lease.
- `check(raft, now_ms)`: read at delivery, on the node's beat and when a
  timer the core asked for fires. As the Raft leader, the quorum heard renews
  (or, lapsed, restores) the lease first; then the lease is read at `now_ms`,
  which lapses it if it expired. A lapsed follower gets `AskLeaseProof`: ask
  the Raft leader's read index, wait until this node applied it, and answer
  `proved(...)`. The verdict names a time to check again while the lease is
  lapsed, since nothing else may come to ask (no delivery waits on a lapsed
  lease's pump, and the leader may be unknown).
- `term_changed()`: what voters said in an earlier term proves nothing now.

Invariants:
- at most one proof in flight; the first is asked in the millisecond after
  the lapse (a proof must start strictly after it), a failed one `retry_ms`
  later, one whose leader changed meanwhile at once (of the new leader);
- a proof restores only if it was started after the lapse and the leader that
  gave it is still the leader (`LeaderLease.restore_proven_by`);
- the Raft leader never asks a read index: a quorum heard `restore_margin_ms`
  after the lapse is its proof (`LeaderLease.quorum_proves`);
- `lapsed_now` is reported once per lapse, `restored` once per restore.

Pure: time comes in as `now_ms` of the monotonic clock.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import NamedTuple

from logbroker.cluster.leader_lease import LeaderLease, quorum_heard_ms

__all__ = ["AskLeaseProof", "LeaseKeeper", "LeaseRaft", "LeaseVerdict"]
RETRY_MS = 50  # after a failed proof (the Raft tick the loop it replaces slept)


class LeaseRaft(NamedTuple):  # built at every reading: a frozen dataclass costs 3x
    """What this node's Raft says of itself, as the lease needs it."""

    leader: str | None
    leading: bool
    term: int
    voters: Collection[str]


@dataclass(frozen=True, slots=True)
class AskLeaseProof:
    """Ask `leader` its read index, wait until it is applied here, then answer
    `proved(request, leader_now, applied, now_ms)`."""

    request: int
    leader: str
    started_ms: int


@dataclass(frozen=True, slots=True)
class LeaseVerdict:
    valid: bool  # the node's queue leaders may deliver now
    lapsed_now: bool  # the lease lapsed at this check (say it once)
    silent_ms: int  # how long the authority had not been heard, when it lapsed
    restored: bool  # restored at this check (what waited for it may go on)
    ask: AskLeaseProof | None = None
    check_again_ms: int | None = None  # lapsed: check again at this time


_VALID = LeaseVerdict(True, False, 0, False)  # the usual answer, shared
_RESTORED = LeaseVerdict(True, False, 0, True)


class LeaseKeeper:
    def __init__(self, node_name: str, lease_ms: int, now_ms: int,
                 restore_margin_ms: int = 200, retry_ms: int = RETRY_MS) -> None:
        self.node_name = node_name
        self.lease = LeaderLease(lease_ms, now_ms, restore_margin_ms)
        self._retry_ms = retry_ms
        self._voter_heard: dict[str, int] = {}  # as Raft leader: when each voter was heard
        self._asked: AskLeaseProof | None = None
        self._last_request = 0
        self._retry_at_ms = 0

    # ------------------------------------------------------------- events

    def term_changed(self) -> None:
        self._voter_heard.clear()

    def heard(self, source: str, term: int, raft: LeaseRaft, now_ms: int) -> bool:
        """A Raft message from `source` in `term` was stepped; True: it restored the lease."""
        if not raft.leading:
            if source == raft.leader:
                self.lease.renew(now_ms)
            return False
        # Only answers in the leader's own term count: a newer term has demoted us.
        if term != raft.term or source not in raft.voters:
            return False
        self._voter_heard[source] = now_ms
        return self.lease.lapsed and self._quorum_renews(raft, now_ms)

    def check(self, raft: LeaseRaft, now_ms: int) -> LeaseVerdict:
        """Whether the lease holds at `now_ms`, and what to do about a lapsed one."""
        lease = self.lease
        restored = raft.leading and self._quorum_renews(raft, now_ms)
        was_lapsed = lease.lapsed
        valid = lease.valid(now_ms)
        if valid:
            return _RESTORED if restored else _VALID
        lapsed_now = not was_lapsed
        silent_ms = now_ms - lease.renewed_ms if lapsed_now else 0
        ask = self._want_proof(raft, now_ms)
        if ask is not None or self._asked is not None:
            return LeaseVerdict(False, lapsed_now, silent_ms, restored, ask)
        return LeaseVerdict(False, lapsed_now, silent_ms, restored, None,
                            max(self._next_ask_ms(), now_ms + 1) if self._may_ask(raft)
                            else now_ms + self._retry_ms)

    def proved(self, request: int, leader_now: str | None, applied: bool,
               now_ms: int) -> bool:
        """The answer to `AskLeaseProof` `request`: `applied` says whether this node
        applied the leader's read index. True: the lease is restored."""
        asked = self._asked
        if asked is None or asked.request != request:
            return False
        self._asked = None
        if not applied:
            self._retry_at_ms = now_ms + self._retry_ms
            return False
        if leader_now != asked.leader or not self.lease.restore_proven_by(asked.started_ms):
            return False
        self.lease.restore(now_ms)
        return True

    # ------------------------------------------------------------- rules

    def _quorum_renews(self, raft: LeaseRaft, now_ms: int) -> bool:
        """As the Raft leader: renew from the quorum heard; True if that restored it."""
        voters = sorted({*raft.voters, self.node_name})
        quorum = quorum_heard_ms(voters, self.node_name, self._voter_heard, now_ms)
        if quorum is None:
            return False
        lease = self.lease
        restored = lease.lapsed and lease.quorum_proves(quorum)
        if restored:
            lease.restore(now_ms)
        lease.renew(quorum)
        return restored

    def _may_ask(self, raft: LeaseRaft) -> bool:
        return self._asked is None and not raft.leading and raft.leader is not None

    def _next_ask_ms(self) -> int:
        """A proof must start after the lapse (`restore_proven_by`: strictly later), and
        a failed one is asked again only after the retry delay."""
        lapsed_at = self.lease.lapsed_at
        return max(self._retry_at_ms, (lapsed_at if lapsed_at is not None else 0) + 1)

    def _want_proof(self, raft: LeaseRaft, now_ms: int) -> AskLeaseProof | None:
        if not self._may_ask(raft) or now_ms < self._next_ask_ms():
            return None
        assert raft.leader is not None  # `_may_ask`
        self._last_request += 1
        self._asked = AskLeaseProof(self._last_request, raft.leader, now_ms)
        return self._asked
