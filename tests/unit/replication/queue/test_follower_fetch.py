"""`FollowerFetch` (the follower's fetch loop, pure): explicit now_ms, no sleeps."""

from replication.queue.epoch_history import EpochStart
from replication.queue.fetch_protocol import FetchRequest, StreamAnswer
from replication.queue.follower_fetch import (
    Append,
    ApplyReset,
    ApplyTruncate,
    FetchTiming,
    FollowerFetch,
    ReplicaPosition,
    SendFetch,
    Sync,
    TakeProgress,
    WaitUntil,
)
from replication.queue.replication_leader import Refuse, Reset, Truncate

TIMING = FetchTiming(fetch_timeout_ms=100, backoff_min_ms=10, backoff_max_ms=40,
                     catch_up_lag=50, catch_up_rest_max_ms=30)
AT = ReplicaPosition(next_offset=7, last_epoch=2, log_start=3, acked_version=5,
                     high_watermark=None)


def _sent(core: FollowerFetch, now_ms: int, leader: str = "a") -> SendFetch:
    effects = core.poll(now_ms, leader, 2, AT)
    sends = [e for e in effects if isinstance(e, SendFetch)]
    assert len(sends) == 1, effects
    return sends[0]


def _stream(hw: int, batches: tuple[bytes, ...] = ()) -> StreamAnswer:
    return StreamAnswer(hw, 0, (EpochStart(2, 0),), 9, None, batches)


def test_a_fetch_reports_the_replicas_position_to_the_recorded_leader() -> None:
    core = FollowerFetch("b", TIMING, 0)
    effects = core.poll(0, "a", 2, AT)
    assert effects == [WaitUntil(100, "fetch timeout"),
                       SendFetch(1, "a", FetchRequest(2, 7, 2, 3, 5, 0))]
    assert core.outstanding == 1


def test_no_leader_or_this_node_leading_waits_the_minimum() -> None:
    core = FollowerFetch("b", TIMING, 0)
    assert core.poll(0, None, 2, AT) == [WaitUntil(10, "no leader to fetch from")]
    assert core.poll(5, "a", 2, AT) == [WaitUntil(10, "waiting")]  # not yet
    assert core.poll(10, "b", 2, AT) == [WaitUntil(20, "no leader to fetch from")]


def test_batches_are_durable_before_the_progress_is_taken_and_the_next_fetch_sent() -> None:
    core = FollowerFetch("b", TIMING, 0)
    fetch = _sent(core, 0)
    answer = _stream(10, (b"batch",))
    assert core.answered(fetch.request_id, answer, 5) == [Append((b"batch",), answer.epochs),
                                                           Sync()]
    assert core.syncing
    assert core.poll(200, "a", 2, AT) == []  # nothing is sent while the sync runs
    assert core.synced(8, next_offset=10) == [TakeProgress(answer), WaitUntil(8, "streaming")]
    assert _sent(core, 8).request_id == 2


def test_an_answer_without_batches_is_taken_at_once() -> None:
    core = FollowerFetch("b", TIMING, 0)
    fetch = _sent(core, 0)
    answer = _stream(7)
    assert core.answered(fetch.request_id, answer, 3) == [TakeProgress(answer),
                                                           WaitUntil(3, "streaming")]


def test_far_behind_rests_as_long_as_the_fetch_took_bounded() -> None:
    core = FollowerFetch("b", TIMING, 0)
    fetch = _sent(core, 100)
    core.answered(fetch.request_id, _stream(1000, (b"x",)), 110)
    effects = core.synced(120, next_offset=10)
    assert effects[-1] == WaitUntil(140, "catching up")  # the fetch took 20 ms
    fetch = _sent(core, 140)
    core.answered(fetch.request_id, _stream(1000, (b"x",)), 190)
    assert core.synced(200, next_offset=20)[-1] == WaitUntil(230, "catching up")  # max 30


def test_within_the_lag_no_rest() -> None:
    core = FollowerFetch("b", TIMING, 0)
    fetch = _sent(core, 100)
    core.answered(fetch.request_id, _stream(60, (b"x",)), 110)
    assert core.synced(120, next_offset=10)[-1] == WaitUntil(120, "streaming")


def test_truncate_and_reset_apply_then_fetch_again() -> None:
    core = FollowerFetch("b", TIMING, 0)
    fetch = _sent(core, 0)
    assert core.answered(fetch.request_id, Truncate(4, 1), 1) == [
        ApplyTruncate(Truncate(4, 1)), WaitUntil(1, "cut")]
    fetch = _sent(core, 1)
    assert core.answered(fetch.request_id, Reset(50), 2) == [ApplyReset(50),
                                                              WaitUntil(2, "reset")]


def test_refused_waits_the_minimum() -> None:
    core = FollowerFetch("b", TIMING, 0)
    fetch = _sent(core, 0)
    assert core.answered(fetch.request_id, Refuse("epoch 3"), 4) == [
        WaitUntil(14, "refused: epoch 3")]


def test_timeouts_back_off_doubling_to_the_maximum_and_an_answer_resets() -> None:
    core = FollowerFetch("b", TIMING, 0)
    now = 0
    waits = []
    for _ in range(4):
        _sent(core, now)
        now += 100
        (wait,) = core.poll(now, "a", 2, AT)  # the deadline passed
        assert isinstance(wait, WaitUntil)
        waits.append(wait.at_ms - now)
        now = wait.at_ms
    assert waits == [10, 20, 40, 40]
    fetch = _sent(core, now)
    core.answered(fetch.request_id, Refuse("not yet"), now)
    _sent(core, now + 10)
    assert core.failed(99, now + 20) == []  # not the outstanding fetch
    assert core.failed(core.outstanding, now + 20) == [WaitUntil(now + 30, "backing off")]


def test_late_and_duplicate_answers_are_ignored() -> None:
    core = FollowerFetch("b", TIMING, 0)
    first = _sent(core, 0)
    core.poll(100, "a", 2, AT)  # timed out
    assert core.answered(first.request_id, _stream(9), 101) == []
    second = _sent(core, 110)
    assert core.answered(second.request_id, _stream(9), 111) != []
    assert core.answered(second.request_id, _stream(9), 112) == []


def test_a_record_change_ends_a_wait_at_once_or_skips_the_next() -> None:
    core = FollowerFetch("b", TIMING, 0)
    core.poll(0, None, 1, AT)  # waits until 10
    assert core.wake(3) == [WaitUntil(3, "the queue's record changed")]
    fetch = _sent(core, 3)
    assert core.wake(4) == []  # a fetch is under way
    assert core.answered(fetch.request_id, Refuse("old epoch"), 5) == [
        WaitUntil(5, "refused: old epoch")]  # the wait is skipped


def test_a_replica_that_cannot_take_an_answer_backs_off() -> None:
    core = FollowerFetch("b", TIMING, 0)
    fetch = _sent(core, 0)
    core.answered(fetch.request_id, _stream(10, (b"bad",)), 1)
    assert core.failed(None, 2) == [WaitUntil(12, "backing off")]
    assert not core.syncing
    assert core.synced(3, 10) == []  # a sync that ends after is not taken
