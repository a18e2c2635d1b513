"""`FollowerFetchDriver`: a node's follower replicas, each a `FollowerFetch` core run over ports.

Theory of operation. The driver is synchronous and owns no I/O: it feeds the
cores their events (a timer fired, a fetch answered or failed, a sync done, a
queue's record changed) with the clock's `monotonic_ms`, and carries their
effects out, in order, through narrow ports:

- `FetchTransport`: send a fetch to the leader, call back once with its
  answer or a `FetchFailed` (the cluster RPC in production, the simulated
  network in tests/sim);
- `QueueLeaders`: the leader and epoch the metadata records for a queue;
- `ReplicaDisk`: open a queue's `FollowerReplica` and make its appended
  batches durable, calling back when they are (an fsync thread in
  production; in the simulation a later tick, so a crash first loses them);
- `Timers`: call back at a monotonic time;
- the replica itself (`FollowerReplica`) for appends, cuts, resets and acks.

So the asyncio shell (logbroker/cluster/queue_followers.py) and the
deterministic simulation run this same code and differ only in their ports.

Invariants: a callback from a port reaches a core only while that core is
still the one following its queue (`stop` detaches it; a later `follow`
starts a new one); an effect the replica refuses (it raises) counts as a
failed fetch and backs off, it never ends the loop.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from replication.queue.fetch_protocol import FetchAnswer, FetchRequest, StreamAnswer
from replication.queue.follower_fetch import (
    CATCHING_UP,
    Append,
    ApplyReset,
    ApplyTruncate,
    FetchTiming,
    FollowerEffect,
    FollowerFetch,
    ReplicaPosition,
    SendFetch,
    Sync,
    TakeProgress,
    WaitUntil,
)
from replication.queue.follower_replica import FollowerReplica
from replication.queue.timers import TimerHandle, Timers
from segments.clock import Clock

logger = logging.getLogger(__name__)
Key = tuple[str, str]  # (vhost, queue name)


@dataclass(frozen=True, slots=True)
class FetchFailed:
    """No answer: a timeout, the peer unreachable, an error answer."""

    reason: str
    unexpected: bool = False  # a fault worth a warning, not the cluster's weather


@dataclass(frozen=True, slots=True)
class LeaderAt:
    node: str | None
    epoch: int


class FetchTransport(Protocol):
    def fetch(self, leader: str, key: Key, request: FetchRequest,
              on_answer: Callable[[FetchAnswer | FetchFailed], None]) -> None: ...


class ReplicaDisk(Protocol):
    def open(self, key: Key) -> FollowerReplica: ...

    def sync(self, replica: FollowerReplica, done: Callable[[Exception | None], None]
             ) -> None: ...


QueueLeaders = Callable[[Key], LeaderAt | None]


@dataclass(eq=False)
class _Followed:
    key: Key
    core: FollowerFetch
    replica: FollowerReplica
    timer: TimerHandle | None = None


class FollowerFetchDriver:
    def __init__(self, node: str, transport: FetchTransport, leaders: QueueLeaders,
                 disk: ReplicaDisk, timers: Timers, clock: Clock,
                 timing: FetchTiming | None = None) -> None:
        self.node = node
        self.timing = timing or FetchTiming()
        self._transport = transport
        self._leaders = leaders
        self._disk = disk
        self._timers = timers
        self._clock = clock
        self._followed: dict[Key, _Followed] = {}
        self.stats: Counter[str] = Counter()  # truncations, resets, catch-up rests

    def following(self) -> set[Key]:
        return set(self._followed)

    def replica(self, key: Key) -> FollowerReplica | None:
        followed = self._followed.get(key)
        return followed.replica if followed is not None else None

    def replicas(self) -> dict[Key, FollowerReplica]:
        return {key: followed.replica for key, followed in self._followed.items()}

    def follow(self, key: Key) -> None:
        """Follow the queue (its record changed: a waiting loop retries at once)."""
        followed = self._followed.get(key)
        if followed is not None:
            self._run(followed, followed.core.wake(self._clock.monotonic_ms()))
            return
        now = self._clock.monotonic_ms()
        followed = _Followed(key, FollowerFetch(self.node, self.timing, now),
                             self._disk.open(key))
        self._followed[key] = followed
        logger.info("node %s follows queue %r in vhost %r", self.node, key[1], key[0])
        self._poll(followed)

    def stop(self, key: Key) -> FollowerReplica | None:
        """Stop following; the replica is the caller's to close (once a sync under way
        is done: its `ReplicaDisk` knows)."""
        followed = self._followed.pop(key, None)
        if followed is None:
            return None
        if followed.timer is not None:
            followed.timer.cancel()
        return followed.replica

    # ------------------------------------------------------------ port events

    def _current(self, followed: _Followed) -> bool:
        return self._followed.get(followed.key) is followed

    def _poll(self, followed: _Followed) -> None:
        if not self._current(followed):
            return
        record = self._leaders(followed.key)
        leader, epoch = (record.node, record.epoch) if record is not None else (None, 0)
        self._run(followed, followed.core.poll(self._clock.monotonic_ms(), leader, epoch,
                                               _position(followed.replica)))

    def _answered(self, followed: _Followed, request_id: int,
                  answer: FetchAnswer | FetchFailed) -> None:
        if not self._current(followed):
            return
        now = self._clock.monotonic_ms()
        if isinstance(answer, FetchFailed):
            if answer.unexpected:
                logger.warning("replica of queue %r: %s", followed.key[1], answer.reason)
            self._run(followed, followed.core.failed(request_id, now))
            return
        self._run(followed, followed.core.answered(request_id, answer, now))

    def _synced(self, followed: _Followed, error: Exception | None) -> None:
        if not self._current(followed):
            return
        now = self._clock.monotonic_ms()
        if error is not None:
            logger.warning("replica of queue %r: %s", followed.key[1], error)
            self._run(followed, followed.core.failed(None, now))
            return
        self._run(followed, followed.core.synced(now, followed.replica.next_offset))

    # ---------------------------------------------------------------- effects

    def _run(self, followed: _Followed, effects: list[FollowerEffect]) -> None:
        for effect in effects:
            if not self._current(followed):
                return
            try:
                self._apply(followed, effect)
            except Exception as error:  # the replica could not take the answer
                if isinstance(effect, WaitUntil):
                    raise  # the timers themselves failed: backing off would need them
                logger.warning("replica of queue %r: %s", followed.key[1], error)
                self._run(followed, followed.core.failed(None, self._clock.monotonic_ms()))
                return

    def _apply(self, followed: _Followed, effect: FollowerEffect) -> None:
        replica = followed.replica
        if isinstance(effect, WaitUntil):
            if effect.why == CATCHING_UP:
                self.stats["catch_up_rests"] += 1
            if followed.timer is not None:
                followed.timer.cancel()
            followed.timer = self._timers.call_at(effect.at_ms, partial(self._poll, followed))
        elif isinstance(effect, SendFetch):
            self._transport.fetch(effect.leader, followed.key, effect.request,
                                  partial(self._answered, followed, effect.request_id))
        elif isinstance(effect, Append):
            replica.append(effect.batches, effect.epochs)
        elif isinstance(effect, Sync):
            replica.plan_sync(self._clock.monotonic_ms())
            self._disk.sync(replica, partial(self._synced, followed))
        elif isinstance(effect, TakeProgress):
            _take(replica, effect.answer, self._clock.monotonic_ms())
        elif isinstance(effect, ApplyTruncate):
            cut = replica.truncate(effect.verdict)
            self.stats["truncations"] += 1
            logger.info("replica of queue %r cut its log at %d (diverged)", followed.key[1], cut)
        elif isinstance(effect, ApplyReset):
            replica.reset(effect.start_offset)
            self.stats["resets"] += 1


def _position(replica: FollowerReplica) -> ReplicaPosition:
    return ReplicaPosition(replica.next_offset, replica.last_epoch, replica.log_start,
                           replica.acked_version, replica.high_watermark)


def _take(replica: FollowerReplica, answer: StreamAnswer, now_ms: int) -> None:
    """The acked ranges, the high watermark and the log start of a durable answer."""
    if answer.acked is not None:
        replica.take_acks(answer.acked, answer.acked_version, now_ms)
    replica.high_watermark = max(replica.high_watermark or 0, answer.high_watermark)
    with contextlib.suppress(Exception):  # retention here is best effort: the next try
        replica.follow_log_start(answer.log_start)
