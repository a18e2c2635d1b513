"""`LeaderFeed` (the leader's answers to fetches and its in-sync proposals, pure):
explicit now_ms, no sleeps."""

from collections.abc import Callable
from dataclasses import dataclass, field

from replication.queue.epoch_history import EpochHistory, EpochStart
from replication.queue.fetch_protocol import FetchRequest
from replication.queue.leader_feed import (
    AnswerNow,
    LeaderFeed,
    Park,
    ProposeInSync,
    StreamFrom,
)
from replication.queue.replication_leader import (
    Refuse,
    ReplicationLeader,
    ReplicationLimits,
    Truncate,
)

KEY = ("/", "q")


@dataclass
class Queue:
    leader: ReplicationLeader
    history: EpochHistory = field(default_factory=lambda: EpochHistory([EpochStart(1, 0)]))
    acked_version: int = 1 << 32
    log_start: int = 0
    fenced: str | None = None
    moves: int = 0

    def moved(self, change: Callable[[], object]) -> None:
        self.moves += 1
        change()


def _queue(durable_end: int = 10, lag_max_ms: int = 100) -> Queue:
    leader = ReplicationLeader("a", 1, ("a", "b", "c"), ("a", "b", "c"), durable_end, 0, 0,
                               ReplicationLimits(lag_max_ms=lag_max_ms))
    return Queue(leader)


def _fetch(next_offset: int, acked_version: int = 1 << 32, hw: int = 0,
           epoch: int = 1) -> FetchRequest:
    return FetchRequest(epoch, next_offset, 1 if next_offset else 0, 0, acked_version, hw)


def test_a_fetch_for_a_queue_not_led_here_or_fenced_is_refused_at_once() -> None:
    feed = LeaderFeed("a", 1000)
    assert feed.on_fetch("b", KEY, _fetch(0), None, 0, 1000, 0) == AnswerNow(
        Refuse("node a does not lead queue 'q' in vhost '/'"))
    queue = _queue()
    queue.fenced = "epoch 2 began"
    assert feed.on_fetch("b", KEY, _fetch(0), queue, 0, 1000, 0) == AnswerNow(
        Refuse("epoch 2 began"))


def test_a_verdict_other_than_stream_is_answered_at_once() -> None:
    feed = LeaderFeed("a", 1000)
    queue = _queue()
    request = FetchRequest(1, 12, 1, 0, 1 << 32, 0)  # past the leader's end
    assert feed.on_fetch("b", KEY, request, queue, 0, 1000, 0) == AnswerNow(Truncate(10, 1))
    assert queue.moves == 1  # judged through the queue: it releases what a fetch allows


def test_news_is_streamed_at_once() -> None:
    feed = LeaderFeed("a", 1000)
    queue = _queue()
    assert feed.on_fetch("b", KEY, _fetch(4), queue, 0, 1000, 0) == StreamFrom(4, False)
    stale_acks = _fetch(10, acked_version=7)
    assert feed.on_fetch("b", KEY, stale_acks, queue, 0, 1000, 0) == StreamFrom(10, True)


def test_a_caught_up_follower_is_parked_until_its_deadline() -> None:
    feed = LeaderFeed("a", 1000)
    queue = _queue()
    queue.leader.on_fetch("c", 1, 10, 1, queue.history, 0, 0)  # the watermark reaches 10
    deadline = feed.deadline(50)
    assert deadline == 1050
    caught_up = _fetch(10, hw=10)
    assert feed.on_fetch("b", KEY, caught_up, queue, 50, deadline, 0) == Park(1050)
    assert feed.on_fetch("b", KEY, caught_up, queue, 1050, deadline, 0) == StreamFrom(10, False)


def test_a_higher_watermark_is_news() -> None:
    feed = LeaderFeed("a", 1000)
    queue = _queue()
    queue.leader.on_fetch("c", 1, 10, 1, queue.history, 0, 0)
    assert feed.on_fetch("b", KEY, _fetch(10, hw=3), queue, 0, 1000, 0) == StreamFrom(10, False)


def test_the_in_sync_check_proposes_for_the_leaders_epoch_and_again_after_a_failure() -> None:
    feed = LeaderFeed("a", 1000)
    queue = _queue(lag_max_ms=100)
    assert feed.tick([(KEY, queue)], 50) == []  # within the lag bound
    (proposal,) = feed.tick([(KEY, queue)], 200)  # b and c never fetched
    assert proposal == ProposeInSync(KEY, 1, ("a",))
    assert feed.tick([(KEY, queue)], 250) == []  # one change at a time
    feed.proposed(queue, proposal, committed=False)
    assert feed.tick([(KEY, queue)], 300) == [proposal]  # its outcome unknown: again
    feed.proposed(queue, proposal, committed=True)
    assert queue.leader.in_sync == ("a",)
    assert feed.tick([(KEY, queue)], 350) == []


def test_a_committed_change_does_not_reach_a_fenced_leader() -> None:
    feed = LeaderFeed("a", 1000)
    queue = _queue(lag_max_ms=100)
    (proposal,) = feed.tick([(KEY, queue)], 200)
    queue.fenced = "epoch 2 began"
    feed.proposed(queue, proposal, committed=True)
    assert queue.leader.in_sync == ("a", "b", "c")
    assert feed.tick([(KEY, queue)], 300) == []  # fenced queues are not checked
