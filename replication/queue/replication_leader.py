"""`ReplicationLeader`: a queue leader's view of its followers (pure).

Theory of operation. Followers pull: each fetch says (epoch, the follower's
next offset, the last epoch it holds). The leader answers with a verdict
(`on_fetch`): stream from that offset, cut the log back first (the follower
holds records of an epoch that did not survive here), start over at the
log's start (it fell behind retention), or refuse (another epoch). A fetch
at next offset N also says the follower has persisted everything below N:
that is its progress, kept as a few numbers per follower whatever the
length of an outage, and nothing is buffered for a follower that is away
(the leader reads its log when a fetch comes).

The high watermark is the lowest persisted end among the in-sync replicas
(the leader's durable end included) and the members a pending in-sync
change adds. It never falls. Publishes below it are confirmed and messages
below it are deliverable; nothing above it has enough copies to survive a
failover.

Divergence: a follower whose last epoch ends sooner here than its next
offset, or that holds an epoch this log does not know, is told where the
last shared epoch ends (`Truncate`); the follower cuts at the sooner of that
and its own end of that epoch, and fetches again.

Synchronisation (RabbitMQ's ha-sync-mode): under `automatic` a follower
that lacks messages still in the queue is reset to the leader's log start
and copies everything through the same stream (the queue keeps serving),
unless it is in sync: it holds every confirmed message, a failover may
promote it, and what it lacks was settled at an earlier leader;
under `manual` a new follower starts at the leader's end and is in sync
only once every older message is settled, unless `request_sync` asks it for
a full copy (`cancel_sync` drops one under way).

In-sync tracking: a follower is caught up when a fetch reaches the leader's
durable end (all it can be sent), and was caught up at its previous fetch
when a fetch reaches where that end was then (Kafka's rule: under a steady
stream of publishes no fetch finds the leader idle); a follower whose node
is recorded down is not caught up (`follower_down`); an in-sync follower
that has not been caught up for `lag_max_ms`, or is more than
`lag_max_messages` behind, is dropped from the set; an out-of-sync follower
whose persisted end reaches the high watermark is added back, once it also
holds every message not yet settled (its log starts at or below the ack
floor). The set only changes through the metadata log (the leader proposes,
`in_sync_committed` applies), one change at a time, and the high watermark
counts both the recorded set and the members a pending change adds, so
every set the controller has recorded (or may be about to record) holds
every confirmed message: a failover then picks from replicas that truly do.

Invariants: the leader is always in the in-sync set; the high watermark is
monotonic and never above the leader's durable end; at most one in-sync
change is outstanding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from replication.queue.epoch_history import EpochHistory


@dataclass(frozen=True, slots=True)
class ReplicationLimits:
    lag_max_ms: int = 4000
    lag_max_messages: int = 1_000_000
    min_in_sync: int | None = None  # None: a majority of the members

    def min_in_sync_of(self, member_count: int) -> int:
        if self.min_in_sync is not None:
            return max(1, min(self.min_in_sync, member_count))
        return member_count // 2 + 1


@dataclass(frozen=True, slots=True)
class Stream:
    """Send records from `from_offset` (the follower's next offset)."""

    from_offset: int


@dataclass(frozen=True, slots=True)
class Truncate:
    """The follower's records diverge: epoch `epoch` (the last one the leader shares with
    it) ends at `to_offset` here; the follower cuts its log there, or where that epoch ends
    in its own log if sooner (`follower_cut`), then fetches again."""

    to_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Reset:
    """The follower is below the log's start: it empties its log and starts at `start_offset`."""

    start_offset: int


@dataclass(frozen=True, slots=True)
class Refuse:
    """Not this leader's epoch, or not a member: `reason` says which."""

    reason: str


FetchVerdict = Stream | Truncate | Reset | Refuse


@dataclass(slots=True)
class FollowerProgress:
    persisted_end: int = 0
    caught_up_ms: int = 0  # last time the follower held everything the leader had written
    fetched_ms: int = 0
    fetched_end: int = 0  # the leader's written end at the time of `fetched_ms`
    log_start: int = 0  # the follower's oldest offset: it lacks everything below


class ReplicationLeader:
    def __init__(self, node: str, epoch: int, members: Sequence[str], in_sync: Sequence[str],
                 durable_end: int, high_watermark: int, now_ms: int,
                 limits: ReplicationLimits | None = None, sync_mode: str = "automatic"
                 ) -> None:
        self.node = node
        self.sync_mode = sync_mode  # RabbitMQ's ha-sync-mode: automatic | manual
        self.epoch = epoch
        self.members = tuple(members)
        self.limits = limits or ReplicationLimits()
        self._in_sync = tuple(in_sync) if node in in_sync else (node, *in_sync)
        self._durable_end = durable_end
        self._written_end = durable_end
        self._high_watermark = min(high_watermark, durable_end)
        # A new leader gives its followers a full lag bound to show up.
        self._progress = {m: FollowerProgress(0, now_ms, now_ms) for m in self.members
                          if m != node}
        self._pending: tuple[str, ...] | None = None
        self._retry = False  # the pending proposal's outcome is unknown: propose it again
        self._ack_floor = 0
        self._acked_versions: dict[str, int] = {}  # what each follower's last fetch held
        self._log_start = 0  # the leader's, as of the last fetch
        self._full_sync: set[str] = set()  # manual mode: asked to copy everything (`sync`)
        self._drop_copy: set[str] = set()  # `cancel_sync`: start over at the end
        self._advance()  # alone in sync: everything durable is replicated enough

    # ----------------------------------------------------------------- state

    @property
    def in_sync(self) -> tuple[str, ...]:
        return self._in_sync

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def durable_end(self) -> int:
        return self._durable_end

    @property
    def written_end(self) -> int:
        return self._written_end

    def progress(self, follower: str) -> FollowerProgress | None:
        return self._progress.get(follower)

    def lag(self, follower: str) -> int | None:
        """Messages the follower has not persisted yet (None: not a follower)."""
        progress = self._progress.get(follower)
        return None if progress is None else max(0, self._written_end - progress.persisted_end)

    def publish_refusal(self) -> str | None:
        """Why a publish must be refused now (too few in-sync replicas), or None."""
        needed = self.limits.min_in_sync_of(len(self.members))
        if len(self._in_sync) < needed:
            return (f"only {len(self._in_sync)} of the {needed} in-sync replicas the queue "
                    f"needs ({', '.join(self._in_sync)} of {', '.join(self.members)})")
        return None

    # ---------------------------------------------------------------- inputs

    def on_fetch(self, follower: str, epoch: int, next_offset: int, last_epoch: int,
                 history: EpochHistory, log_start: int, now_ms: int,
                 follower_log_start: int | None = None) -> FetchVerdict:
        """Judge a fetch; a `Stream` verdict also records the follower's progress.

        `history` and `log_start` are the leader's log's; `follower_log_start` is the
        follower's oldest offset (None: taken to be the leader's log start).
        """
        if epoch != self.epoch:
            return Refuse(f"the queue is at epoch {self.epoch} here, the fetch says {epoch}")
        progress = self._progress.get(follower)
        if progress is None:
            return Refuse(f"node {follower} is not a follower of this queue")
        previous_ms, previous_end = progress.fetched_ms, progress.fetched_end
        progress.fetched_ms, progress.fetched_end = now_ms, self._durable_end
        if last_epoch > self.epoch:
            return Refuse(f"the follower holds epoch {last_epoch}, newer than {self.epoch}")
        self._log_start = log_start
        oldest = log_start if follower_log_start is None else follower_log_start
        progress.log_start = oldest
        # A follower at its log's start without epochs (new, or reset) holds nothing.
        empty = last_epoch == 0 and next_offset == oldest
        verdict = self._sync_verdict(follower, empty, next_offset, oldest, log_start)
        if verdict is not None:
            return verdict
        if next_offset < log_start:
            return Reset(log_start)
        found, end = history.end_offset_of(last_epoch, self._written_end)
        if not empty and (found != last_epoch or next_offset > end):
            return Truncate(end, found)
        progress.persisted_end = max(progress.persisted_end, next_offset)
        if next_offset >= self._durable_end:
            progress.caught_up_ms = now_ms
        elif next_offset >= previous_end:
            progress.caught_up_ms = max(progress.caught_up_ms, previous_ms)
        self._advance()
        return Stream(next_offset)

    def _sync_verdict(self, follower: str, empty: bool, next_offset: int, oldest: int,
                      log_start: int) -> Reset | None:
        """ha-sync-mode: where a follower's copy starts.

        automatic: from the leader's log start (the catch-up stream copies everything);
        manual: a follower that holds nothing starts at the leader's end and takes new
        messages only, until `sync` asks for a full copy or `cancel_sync` drops one.
        """
        if follower in self._drop_copy:
            self._drop_copy.discard(follower)
            if next_offset < self._written_end and follower not in self._in_sync:
                return Reset(self._written_end)
        if self.sync_mode == "manual" and follower not in self._full_sync:
            # Never an in-sync one: it would stop holding confirmed messages.
            if empty and next_offset < self._written_end and follower not in self._in_sync:
                return Reset(self._written_end)
            return None
        if follower not in self._in_sync and oldest > log_start and oldest > self._ack_floor:
            return Reset(log_start)  # it lacks messages still in the queue: copy them all
        return None

    def request_sync(self) -> list[str]:
        """`sync`: every member not in sync copies the whole queue; returns them."""
        lacking = [m for m in self.members if m != self.node and m not in self._in_sync]
        self._full_sync.update(lacking)
        self._drop_copy.difference_update(lacking)
        return lacking

    def cancel_sync(self) -> list[str]:
        """`cancel_sync`: members still copying drop the copy and take new messages only."""
        copying = [m for m in self._full_sync if m not in self._in_sync]
        self._full_sync.clear()
        self._drop_copy.update(copying)
        return copying

    def follower_down(self, follower: str) -> None:
        """The controller recorded the follower's node down: it is not caught up any
        more, so the next `tick` drops it as soon as it lacks anything (confirms need not
        wait out the lag bound for a node known to be gone)."""
        progress = self._progress.get(follower)
        if progress is not None:
            progress.caught_up_ms = -(1 << 62)

    def follower_acked_version(self, follower: str, version: int) -> None:
        """`follower`'s fetch says it holds the leader's acked ranges as of `version`."""
        if follower in self._progress:
            self._acked_versions[follower] = version

    def acked_version_in_sync(self, current: int) -> int:
        """The newest acked-range version every in-sync follower holds (`current`, the
        leader's own, when no follower is in sync)."""
        return min((self._acked_versions.get(node, -1) for node in self._in_sync
                    if node != self.node), default=current)

    def set_ack_floor(self, ack_floor: int) -> None:
        """Every message below `ack_floor` is settled: a copy need not hold it."""
        self._ack_floor = max(self._ack_floor, ack_floor)

    def leader_wrote(self, written_end: int) -> None:
        """The leader's log holds records below `written_end` (durable or not yet)."""
        self._written_end = max(self._written_end, written_end)

    def leader_persisted(self, durable_end: int) -> None:
        """The leader's own log is durable below `durable_end`."""
        self._durable_end = max(self._durable_end, durable_end)
        self._written_end = max(self._written_end, durable_end)
        self._advance()

    def set_members(self, members: Sequence[str], in_sync: Sequence[str], now_ms: int) -> None:
        """The metadata log changed the replica set (same leader, same epoch): a new
        member gets progress from zero and a lag bound to show up; a dropped one is
        forgotten."""
        self.members = tuple(members)
        for member in self.members:
            if member != self.node and member not in self._progress:
                self._progress[member] = FollowerProgress(0, now_ms, now_ms)
        for member in [m for m in self._progress if m not in self.members]:
            del self._progress[member]
            self._full_sync.discard(member)
            self._drop_copy.discard(member)
        self._pending, self._retry = None, False  # a new replica set: decide afresh
        self.in_sync_committed(tuple(m for m in in_sync if m in self.members))

    def in_sync_committed(self, in_sync: Sequence[str]) -> None:
        """The metadata log recorded `in_sync` for this epoch.

        The pending change ends only when this is it: another set committing (an
        older proposal) leaves the pending one possibly still in flight.
        """
        self._in_sync = tuple(in_sync)
        if self._pending == self._in_sync:
            self._pending = None
            self._retry = False
        self._advance()

    def in_sync_change_failed(self) -> None:
        """The proposal's outcome is unknown (refused, dropped, timed out): it may still
        commit, so it stays pending (its additions keep counting) and `tick` proposes
        it again; committing the same set twice changes nothing."""
        if self._pending is not None:
            self._retry = True

    def tick(self, now_ms: int) -> tuple[str, ...] | None:
        """The in-sync set to propose now, if it should change and nothing is pending."""
        if self._pending is not None:
            if self._retry:
                self._retry = False
                return self._pending
            return None
        wanted = [self.node]
        for member in self.members:
            if member == self.node:
                continue
            progress = self._progress[member]
            if member in self._in_sync:
                if not self._lagging(progress, now_ms):
                    wanted.append(member)
            elif (progress.persisted_end >= self._high_watermark
                  and progress.log_start <= max(self._ack_floor, self._log_start)
                  and not self._lagging(progress, now_ms)):
                wanted.append(member)
        proposal = tuple(wanted)
        if proposal == self._in_sync:
            return None
        self._pending = proposal
        return proposal

    def _lagging(self, progress: FollowerProgress, now_ms: int) -> bool:
        behind = self._written_end - progress.persisted_end
        if behind > self.limits.lag_max_messages:
            return True
        return behind > 0 and now_ms - progress.caught_up_ms > self.limits.lag_max_ms

    def _advance(self) -> None:
        # A member that a pending change adds counts already: once the change commits the
        # controller may promote it, so nothing it lacks may be confirmed meanwhile.
        counted = set(self._in_sync).union(self._pending or ())
        ends = [self._durable_end]
        ends.extend(self._progress[m].persisted_end for m in counted if m != self.node
                    and m in self._progress)
        self._high_watermark = max(self._high_watermark, min(ends))


def follower_cut(verdict: Truncate, own_history: EpochHistory, own_end: int) -> int:
    """Where a follower cuts its log on `verdict`: the sooner of the leader's end of the
    shared epoch and its own end of it."""
    own_found, own_epoch_end = own_history.end_offset_of(verdict.epoch, own_end)
    if own_found != verdict.epoch:
        # The follower does not hold that epoch either: keep what precedes its next epoch.
        return min(verdict.to_offset, own_epoch_end)
    return min(verdict.to_offset, own_epoch_end, own_end)
