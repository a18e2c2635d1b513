"""`ReplicationGate`: the leader side of a replicated queue, between its shell and followers.

Theory of operation (DESIGN.md section 6). A replicated queue's leader
writes publishes to its log as a single node does, but a message becomes
ready for consumers, and its publish is confirmed, only once it is below
the high watermark: persisted by every in-sync replica. The shell hands
written records here (`wrote`) and durable ones (`persisted`); followers'
fetches (`logbroker.cluster.replica_feed`) move the high watermark through
the `ReplicationLeader` core (`moved`). The gate does not release anything
itself: it says what a move lets go, a `Release` (the high watermark, and
whether the in-sync set is as large as the queue needs), returned to the
shell from `persisted` and handed to the shell's `ReleaseListener` after a
move made by someone else (a fetch, an in-sync change); the shell applies it
(`append_pipeline`): held messages below it become ready, the publishes it
passed are confirmed, or nacked when the in-sync set is too small.

Fencing: once the queue's epoch has moved on the gate is `fenced`, and
while this node has lost the controller for the session timeout it is
`isolated` (the controller may have elected another leader meanwhile): in
both states publishes are refused and acks ignored, so a stale leader can
neither confirm nor settle anything the new leader would not know. An
isolated gate whose node hears from the controller again, still leading the
same epoch, carries on, and the acks it held meanwhile count then (dropping
them would leave their messages unacked on a live channel forever).

Deliveries wait for `delivers()`: not fenced, not isolated, and the node's
leader lease (`lease`, set by a clustered node: logbroker.cluster.leader_lease)
holds, read at the moment of delivery. A leader paused past its lease may have
been replaced, and a delivery then could repeat, unflagged, what the new leader
redelivered and saw acked.

Invariants: the high watermark never goes back; every move of it reaches
the shell (returned from `persisted`, handed to the listener by `moved`), and
applying a release again changes nothing; a `Release` carries a refusal
whenever the in-sync set is smaller than `min-in-sync` (the publishes it
passed are nacked: too few copies); a fenced gate stays fenced and tells its
listener once (the shell closes soon after).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from logbroker.queue.queue_stats import AppendWaiters
from replication.queue.epoch_history import EpochHistory
from replication.queue.replication_leader import ReplicationLeader


@dataclass(frozen=True, slots=True)
class Release:
    """What the gate lets go: every message below `high_watermark`. Their publishes are
    confirmed, unless `refusal` says the in-sync set is smaller than the queue needs
    (then they are nacked: written and deliverable, but not confirmed)."""

    high_watermark: int
    refusal: str | None


class ReleaseListener(Protocol):
    """The shell's side of the gate: where releases and the fence go."""

    def release(self, release: Release) -> None: ...

    def abandon(self, reason: str) -> None:
        """The gate is fenced: nothing waiting for it will be confirmed."""
        ...


class ReplicationGate:
    def __init__(self, leader: ReplicationLeader, history: EpochHistory) -> None:
        self.leader = leader
        self.history = history
        self.changes = AppendWaiters()  # fetches waiting for news
        self.fenced: str | None = None
        self.paused: str | None = None  # a handover is under way: publishes wait elsewhere
        self.isolated: str | None = None  # cut off from the controller: maybe fenced already
        # Bumped whenever the cursor's range set grows; it starts from the epoch, so a
        # version a follower got from an earlier leader is older than any of ours.
        self.acked_version = leader.epoch << 32
        self.sync_batch_size = 4096
        self.listener: ReleaseListener | None = None
        self.on_rejoin: Callable[[], None] | None = None  # acks held while isolated
        # Whether this node may still deliver as this epoch's leader (None: no lease,
        # a standalone node's queue).
        self.lease: Callable[[], bool] | None = None
        # tx.commits waiting for followers to hold the acked ranges of a version:
        self._ack_waiters: collections.deque[tuple[int, asyncio.Future[None]]] = (
            collections.deque())

    @property
    def high_watermark(self) -> int:
        return self.leader.high_watermark

    def publish_refusal(self) -> str | None:
        return self.fenced or self.isolated or self.paused or self.leader.publish_refusal()

    def delivers(self) -> bool:
        """Whether deliveries may go out now (asked at each pump: it reads the clock)."""
        if self.fenced is not None or self.isolated is not None:
            return False
        return self.lease is None or self.lease()

    @property
    def settles(self) -> bool:
        """Whether acks count here (not when fenced, nor cut off from the controller)."""
        return self.fenced is None and self.isolated is None

    def isolate(self, reason: str) -> None:
        self.isolated = reason

    def rejoin(self) -> None:
        """The controller is heard again and this node still leads this epoch."""
        if self.isolated is not None:
            self.isolated = None
            if self.fenced is None and self.on_rejoin is not None:
                self.on_rejoin()

    def pause(self, reason: str) -> None:
        """Refuse publishes while the leadership moves (`resume` if it does not)."""
        self.paused = reason

    def resume(self) -> None:
        self.paused = None

    def caught_up(self, follower: str) -> bool:
        """Whether `follower` has persisted everything this leader has written."""
        progress = self.leader.progress(follower)
        return progress is not None and progress.persisted_end >= self.leader.written_end

    def fence(self, reason: str) -> None:
        if self.fenced is None:
            self.fenced = reason
            if self.listener is not None:
                self.listener.abandon(reason)
            for _, waiter in self._ack_waiters:
                if not waiter.done():
                    waiter.set_exception(GateFenced(reason))
            self._ack_waiters.clear()
            self.changes.notify()

    # ----------------------------------------------------------- from the shell

    def wrote(self, next_offset: int) -> None:
        self.leader.leader_wrote(next_offset)
        self.changes.notify()

    def persisted(self, next_offset: int) -> Release:
        """The leader's log is durable below `next_offset`: what the gate lets go now
        (for the shell to apply; the high watermark may have moved with it)."""
        self._move(lambda: self.leader.leader_persisted(next_offset))
        self.changes.notify()  # followers may copy it now
        return self.current_release()

    def current_release(self) -> Release:
        return Release(self.high_watermark, self.leader.publish_refusal())

    def acks_grew(self, ack_floor: int) -> None:
        self.acked_version += 1
        self.leader.set_ack_floor(ack_floor)
        self.changes.notify()

    def acks_replicated(self) -> asyncio.Future[None]:
        """A future resolved once every in-sync follower holds the acked ranges as they are
        now (a transaction's acks); failed if the gate is fenced, isolated or has fewer
        in-sync replicas than the queue needs."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        refusal = self.fenced or self.isolated or self.leader.publish_refusal()
        if refusal is not None:
            future.set_exception(GateFenced(refusal))
            return future
        self._ack_waiters.append((self.acked_version, future))
        self._release_acks()
        return future

    def _release_acks(self) -> None:
        held = self.leader.acked_version_in_sync(self.acked_version)
        while self._ack_waiters and self._ack_waiters[0][0] <= held:
            _, future = self._ack_waiters.popleft()
            if not future.done():
                future.set_result(None)

    # --------------------------------------------------------- from the feed

    def moved(self, change: Callable[[], object]) -> Release | None:
        """Run a change to the core (a fetch, an in-sync commit); when it moves the high
        watermark, the listener applies the release, which is also returned."""
        release = self._move(change)
        if release is not None and self.listener is not None:
            self.listener.release(release)
        return release

    def _move(self, change: Callable[[], object]) -> Release | None:
        before = self.leader.high_watermark
        change()
        if self._ack_waiters:  # a fetch's acked version, or a smaller in-sync set
            self._release_acks()
        if self.leader.high_watermark <= before:
            return None
        self.changes.notify()  # followers learn the new high watermark
        return self.current_release()

    def close(self, reason: str) -> None:
        self.fence(reason)


class ConfirmRefused(Exception):
    """The queue declines to confirm what it was given, as the replication rules
    say it must: an expected outcome (the publisher gets a nack), not a fault."""


class GateFenced(ConfirmRefused):
    """The queue's leadership moved on: the publish is not confirmed here."""


class NotEnoughReplicas(ConfirmRefused):
    """The publish reached the high watermark while the in-sync set was smaller than
    the queue's `min-in-sync`: written, but not confirmed."""
