"""`LeaderLease`: whether this node's replicated queue leaders may deliver right now.

Theory of operation. A queue leader that was paused (SIGSTOP, a long stall) or
cut off may have been replaced meanwhile: the controller elects a new leader
once it has not heard the node for its failure-detection time (the session
timeout, or a broken or silent link plus `link_grace_ms`). Fencing and
isolation only start once the node learns that, and until then it would deliver
messages the new leader may already have redelivered and seen acked, unflagged.
So the node holds a lease: it is renewed whenever the node hears the cluster's
authority (a non-leader: a Raft message from the Raft leader; the Raft leader:
a majority of the voters, including itself), and a leader delivers only while
`now - renewed < lease_ms`, with `lease_ms` well below the failure-detection
time, so the controller never elects a new leader while the old one may still
deliver. Time is read at delivery (`valid`), not only on a timer: after a
SIGCONT the first pump sees the lease expired before any delivery.

A lapsed lease is not renewed by what merely arrives next: frames that waited in
the socket during a pause are as old as the pause. It is `restore`d only by
proof that the node's view is current again, taken after the lapse (a read-index
round trip started after it, then applied; for the Raft leader, a quorum heard
`restore_margin_ms` after it). Meanwhile the node's own metadata catches up and
fences the queues it no longer leads.

Invariants: `lapsed_at` is set iff the lease is lapsed; a lapsed lease is never
valid; `renew` never revives a lapsed lease, only `restore` does; `renewed_ms`
never goes back. A standalone node has no lease (its gates have none). Pure:
time comes in as milliseconds of a monotonic clock.
"""

from __future__ import annotations


class LeaderLease:
    def __init__(self, lease_ms: int, now_ms: int, restore_margin_ms: int = 200) -> None:
        if lease_ms <= 0:
            raise ValueError("lease_ms must be positive")
        self.lease_ms = lease_ms
        self.restore_margin_ms = restore_margin_ms
        self.renewed_ms = now_ms
        self.lapsed_at: int | None = None

    @property
    def lapsed(self) -> bool:
        return self.lapsed_at is not None

    def valid(self, now_ms: int) -> bool:
        """Whether leaders here may deliver at `now_ms`; a lease found expired lapses."""
        if self.lapsed_at is not None:
            return False
        if now_ms - self.renewed_ms > self.lease_ms:
            self.lapsed_at = now_ms
            return False
        return True

    def renew(self, now_ms: int) -> None:
        """The authority was heard at `now_ms` (a lapsed lease stays lapsed)."""
        if self.lapsed_at is None and now_ms > self.renewed_ms:
            self.renewed_ms = now_ms

    def restore_proven_by(self, started_ms: int) -> bool:
        """Whether proof that began at `started_ms` (a read index asked then, a quorum
        heard then) may restore the lapsed lease: it must postdate the lapse."""
        return self.lapsed_at is not None and started_ms > self.lapsed_at

    def quorum_proves(self, quorum_heard_ms: int) -> bool:
        """For the Raft leader: a quorum heard this long after the lapse was not merely
        buffered during a pause (see the module docstring)."""
        return (self.lapsed_at is not None
                and quorum_heard_ms >= self.lapsed_at + self.restore_margin_ms)

    def restore(self, now_ms: int) -> None:
        self.lapsed_at = None
        self.renewed_ms = now_ms


def quorum_heard_ms(voters: tuple[str, ...] | list[str], own: str, heard: dict[str, int],
                    now_ms: int) -> int | None:
    """When a majority of `voters` (this node counted at `now_ms`) was last heard: the
    time by which that many had all been heard. None: no majority heard yet."""
    needed = len(voters) // 2 + 1
    times = sorted((now_ms if voter == own else heard.get(voter, -1) for voter in voters),
                   reverse=True)
    if needed > len(times) or times[needed - 1] < 0:
        return None
    return times[needed - 1]
