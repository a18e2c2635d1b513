"""The shipped replication drivers (`FollowerFetchDriver`, `LeaderFeedDriver`) wired to each
other over in-memory ports: a `ManualClock`, timers run by hand, a disk whose syncs finish
when the test says. No asyncio, no sleeps."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from replication.queue.epoch_history import EpochHistory, EpochStart
from replication.queue.fetch_protocol import FetchAnswer, FetchRequest, StreamAnswer
from replication.queue.follower_fetch import FetchTiming
from replication.queue.follower_fetch_driver import (
    FetchFailed,
    FollowerFetchDriver,
    Key,
    LeaderAt,
)
from replication.queue.follower_replica import FollowerReplica
from replication.queue.leader_feed import ProposeInSync
from replication.queue.leader_feed_driver import FeedTiming, LeaderFeedDriver
from replication.queue.replication_leader import ReplicationLeader, ReplicationLimits
from segments.clock import ManualClock
from segments.log import Log
from segments.memory_filesystem import MemoryFileSystem
from segments.record_batch import Record

KEY = ("/", "q")


@dataclass(eq=False)
class Timer:
    action: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class Timers:
    clock: ManualClock
    due: list[tuple[int, int, Timer]] = field(default_factory=list)
    seq: int = 0

    def call_at(self, monotonic_ms: int, action: Callable[[], None]) -> Timer:
        self.seq += 1
        timer = Timer(action)
        heapq.heappush(self.due, (monotonic_ms, self.seq, timer))
        return timer

    def advance(self, ms: int) -> None:
        """Move the clock `ms` on, running each timer at its own time."""
        target = self.clock.monotonic_ms() + ms
        while self.due and self.due[0][0] <= target:
            at, _, timer = heapq.heappop(self.due)
            self.clock.advance(max(0, at - self.clock.monotonic_ms()))
            if not timer.cancelled:
                timer.action()
        self.clock.advance(target - self.clock.monotonic_ms())


class Disk:
    def __init__(self, timers: Timers) -> None:
        self.timers = timers
        self.fs = MemoryFileSystem()
        self.pending: list[tuple[FollowerReplica, Callable[[Exception | None], None]]] = []

    def open(self, key: Key) -> FollowerReplica:
        return FollowerReplica.open(self.fs, "/copy")

    def sync(self, replica: FollowerReplica, done: Callable[[Exception | None], None]
             ) -> None:
        self.pending.append((replica, done))

    def finish(self) -> None:
        pending, self.pending = self.pending, []
        for replica, done in pending:
            replica.sync()
            done(None)
        self.timers.advance(0)  # what the driver set for now


@dataclass
class Led:
    """A queue led by "a", on its own file system."""

    leader: ReplicationLeader
    log: Log
    history: EpochHistory = field(default_factory=lambda: EpochHistory([EpochStart(1, 0)]))
    acked_version: int = 1 << 32
    fenced: str | None = None
    sync_batch_size: int = 4096
    parked: list[tuple[int, Callable[[], None]]] = field(default_factory=list)

    @property
    def log_start(self) -> int:
        return self.log.log_start_offset

    def acked_ranges(self) -> Sequence[tuple[int, int]]:
        return []

    def moved(self, change: Callable[[], object]) -> None:
        change()

    def park(self, deadline_ms: int, wake: Callable[[], None]) -> None:
        self.parked.append((deadline_ms, wake))

    def changed(self) -> None:
        parked, self.parked = self.parked, []
        for _, wake in parked:
            wake()


class Queues:
    def __init__(self, led: Led | None) -> None:
        self.queue = led

    def led(self, key: Key) -> Led | None:
        return self.queue

    def all_led(self) -> list[tuple[Key, Led]]:
        return [] if self.queue is None else [(KEY, self.queue)]


class Proposer:
    def __init__(self) -> None:
        self.proposed: list[tuple[ProposeInSync, Callable[[bool], None]]] = []

    def propose_in_sync(self, proposal: ProposeInSync, done: Callable[[bool], None]) -> None:
        self.proposed.append((proposal, done))


class Wire:
    """`FetchTransport` straight into the leader's driver (or dropping everything)."""

    def __init__(self, feed: LeaderFeedDriver) -> None:
        self.feed = feed
        self.sent: list[FetchRequest] = []
        self.down = False
        self.late: list[Callable[[FetchAnswer | FetchFailed], None]] = []

    def fetch(self, leader: str, key: Key, request: FetchRequest,
              on_answer: Callable[[FetchAnswer | FetchFailed], None]) -> None:
        self.sent.append(request)
        if self.down:
            self.late.append(on_answer)
            return
        self.feed.fetch("b", key, request, on_answer)


def _cluster(records: int) -> tuple[Timers, Led, LeaderFeedDriver, Wire, Disk,
                                    FollowerFetchDriver, Proposer]:
    clock = ManualClock()
    timers = Timers(clock)
    log = Log.open(MemoryFileSystem(), "/log")
    for index in range(records):
        log.append([Record(b"m%d" % index, 0)])
    log.sync()
    leader = ReplicationLeader("a", 1, ("a", "b"), ("a", "b"), log.next_offset, 0, 0,
                               ReplicationLimits(lag_max_ms=1_000))
    led = Led(leader, log)
    proposer = Proposer()
    feed = LeaderFeedDriver("a", Queues(led), proposer, timers, clock,
                            FeedTiming(wait_ms=100, bytes_max=1 << 20, in_sync_every_ms=50))
    wire = Wire(feed)
    disk = Disk(timers)
    followers = FollowerFetchDriver("b", wire, lambda key: LeaderAt("a", 1), disk, timers,
                                    clock, FetchTiming(fetch_timeout_ms=500))
    return timers, led, feed, wire, disk, followers, proposer


def test_a_follower_copies_the_log_and_reports_it_only_once_durable() -> None:
    timers, led, _, wire, disk, followers, _ = _cluster(5)
    followers.follow(KEY)
    timers.advance(0)
    assert [r.next_offset for r in wire.sent] == [0]
    replica = followers.replica(KEY)
    assert replica is not None and replica.next_offset == 5  # appended, not yet durable
    timers.advance(10)
    assert len(wire.sent) == 1  # no fetch while the sync is under way
    assert led.leader.high_watermark == 0
    disk.finish()
    # Now it reports 5; that moves the watermark, which is news for it: one more answer.
    assert [(r.next_offset, r.high_watermark) for r in wire.sent] == [(0, 0), (5, 0), (5, 5)]
    assert led.leader.high_watermark == 5
    assert len(led.parked) == 1  # caught up: a long poll


def test_a_parked_fetch_is_answered_when_the_queue_changes_or_by_its_deadline() -> None:
    timers, led, _, wire, disk, followers, _ = _cluster(2)
    followers.follow(KEY)
    timers.advance(0)
    disk.finish()
    assert len(led.parked) == 1
    led.log.append([Record(b"more", 0)])
    led.log.sync()
    led.leader.leader_persisted(3)
    led.changed()
    timers.advance(0)
    assert disk.pending and followers.replica(KEY).next_offset == 3  # type: ignore[union-attr]
    disk.finish()
    assert len(led.parked) == 1 and wire.sent[-1].high_watermark == 3
    (deadline, wake), = led.parked
    led.parked.clear()
    timers.advance(deadline)  # the deadline passed: a stream with nothing new
    wake()
    timers.advance(0)
    assert wire.sent[-1].next_offset == 3 and len(led.parked) == 1


def test_an_answer_or_sync_after_stop_is_ignored() -> None:
    timers, _, _, wire, disk, followers, _ = _cluster(3)
    followers.follow(KEY)
    timers.advance(0)
    replica = followers.stop(KEY)
    assert replica is not None and followers.following() == set()
    disk.finish()  # the sync under way finishes: nothing else happens
    assert len(wire.sent) == 1
    timers.advance(10_000)
    assert len(wire.sent) == 1


def test_timeouts_back_off_and_a_late_answer_is_ignored() -> None:
    timers, _, _, wire, _, followers, _ = _cluster(1)
    wire.down = True
    followers.follow(KEY)
    timers.advance(0)
    timers.advance(500)  # timed out: backs off 50 ms
    assert len(wire.sent) == 1
    timers.advance(50)
    assert len(wire.sent) == 2
    wire.late[0](StreamAnswer(9, 0, (), 0, None, ()))  # the first fetch's answer, late
    replica = followers.replica(KEY)
    assert replica is not None and replica.high_watermark is None
    timers.advance(500 + 99)
    assert len(wire.sent) == 2  # the second backoff is 100 ms
    timers.advance(1)
    assert len(wire.sent) == 3


def test_the_feed_proposes_in_sync_changes_on_its_timer() -> None:
    timers, led, feed, _, _, _, proposer = _cluster(1)
    feed.start()
    timers.advance(1_050)  # b never fetched for longer than the lag bound
    assert [p for p, _ in proposer.proposed] == [ProposeInSync(KEY, 1, ("a",))]
    proposer.proposed[0][1](True)
    assert led.leader.in_sync == ("a",) and feed.stats["in_sync_changes"] == 1
    feed.stop()
    timers.advance(10_000)
    assert len(proposer.proposed) == 1


def test_an_answer_the_replica_cannot_take_backs_off_and_the_loop_goes_on() -> None:
    timers, _, _, wire, disk, followers, _ = _cluster(1)
    wire.down = True
    followers.follow(KEY)
    timers.advance(0)
    wire.late[0](StreamAnswer(1, 0, (EpochStart(1, 0),), 0, None, (b"not a batch",)))
    assert disk.pending == [] and len(wire.sent) == 1
    timers.advance(49)
    assert len(wire.sent) == 1
    timers.advance(1)  # the minimum backoff
    assert len(wire.sent) == 2
