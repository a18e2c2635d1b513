"""ReplicationLeader: high watermark, fetch verdicts, in-sync tracking, publish refusals."""

from __future__ import annotations

import pytest

from replication.queue.epoch_history import EpochHistory, EpochStart
from replication.queue.replication_leader import (
    FetchVerdict,
    FollowerProgress,
    Refuse,
    ReplicationLeader,
    ReplicationLimits,
    Reset,
    Stream,
    Truncate,
    follower_cut,
)

from .cluster import state_shape

ABC = ("a", "b", "c")


def history(*pairs: tuple[int, int]) -> EpochHistory:
    return EpochHistory(EpochStart(epoch, start) for epoch, start in pairs)


def make_leader(members: tuple[str, ...] = ABC, in_sync: tuple[str, ...] = ABC, epoch: int = 1,
                durable_end: int = 0, high_watermark: int = 0,
                limits: ReplicationLimits | None = None) -> ReplicationLeader:
    return ReplicationLeader("a", epoch, members, in_sync, durable_end, high_watermark, 0, limits)


def fetch(leader: ReplicationLeader, follower: str, next_offset: int, now_ms: int = 0,
          epoch: int | None = None, last_epoch: int | None = None,
          leader_history: EpochHistory | None = None, log_start: int = 0) -> FetchVerdict:
    return leader.on_fetch(
        follower,
        leader.epoch if epoch is None else epoch,
        next_offset,
        leader.epoch if last_epoch is None else last_epoch,
        leader_history if leader_history is not None else history((leader.epoch, 0)),
        log_start,
        now_ms,
    )


def persisted_end(leader: ReplicationLeader, follower: str) -> int:
    progress = leader.progress(follower)
    assert progress is not None
    return progress.persisted_end


def wrote(leader: ReplicationLeader, end: int) -> None:
    leader.leader_wrote(end)
    leader.leader_persisted(end)


# ------------------------------------------------------------- construction


def test_the_leader_is_always_in_the_in_sync_set() -> None:
    leader = make_leader(in_sync=("b",))
    assert leader.in_sync == ("a", "b")
    assert make_leader().in_sync == ABC


def test_the_initial_high_watermark_is_capped_by_the_durable_end() -> None:
    assert make_leader(durable_end=10, high_watermark=25).high_watermark == 10
    assert make_leader(durable_end=10, high_watermark=4).high_watermark == 4


def test_only_followers_have_progress_and_lag() -> None:
    leader = make_leader()
    assert leader.progress("a") is None
    assert leader.progress("z") is None
    assert leader.progress("b") == FollowerProgress(0, 0, 0)
    assert leader.lag("a") is None
    assert leader.lag("b") == 0


# ------------------------------------------------------------- watermarks


def test_the_high_watermark_is_the_lowest_persisted_end_of_the_in_sync_set() -> None:
    leader = make_leader()
    wrote(leader, 10)
    assert leader.high_watermark == 0
    assert fetch(leader, "b", 10) == Stream(10)
    assert leader.high_watermark == 0  # c has nothing yet
    assert fetch(leader, "c", 6) == Stream(6)
    assert leader.high_watermark == 6
    assert fetch(leader, "c", 10) == Stream(10)
    assert leader.high_watermark == 10


def test_a_lone_leader_confirms_what_it_persisted() -> None:
    leader = ReplicationLeader("a", 1, ("a",), ("a",), 0, 0, 0)
    leader.leader_wrote(5)
    assert leader.high_watermark == 0
    leader.leader_persisted(5)
    assert leader.high_watermark == 5


def test_the_high_watermark_never_passes_the_leaders_durable_end() -> None:
    leader = make_leader()
    leader.leader_wrote(10)
    assert fetch(leader, "b", 10) == Stream(10)
    assert fetch(leader, "c", 10) == Stream(10)
    assert leader.high_watermark == 0
    leader.leader_persisted(7)
    assert leader.high_watermark == 7
    leader.leader_persisted(10)
    assert leader.high_watermark == 10


def test_written_and_durable_ends_only_rise() -> None:
    leader = make_leader()
    leader.leader_wrote(10)
    assert (leader.written_end, leader.durable_end) == (10, 0)
    leader.leader_persisted(5)
    assert (leader.written_end, leader.durable_end) == (10, 5)
    leader.leader_wrote(8)
    leader.leader_persisted(3)
    assert (leader.written_end, leader.durable_end) == (10, 5)
    leader.leader_persisted(12)  # persisted implies written
    assert (leader.written_end, leader.durable_end) == (12, 12)


def test_lag_counts_against_the_written_end() -> None:
    leader = make_leader()
    leader.leader_wrote(10)
    fetch(leader, "b", 4)
    assert leader.lag("b") == 6
    assert leader.lag("c") == 10


def test_the_high_watermark_never_falls() -> None:
    leader = make_leader(in_sync=("a", "b"))
    wrote(leader, 10)
    fetch(leader, "b", 10)
    assert leader.high_watermark == 10
    # The controller records a set with a follower that holds less: nothing is taken back.
    leader.in_sync_committed(ABC)
    assert leader.high_watermark == 10
    fetch(leader, "c", 4)
    assert leader.high_watermark == 10
    # A follower repeating an older fetch does not lower its recorded progress.
    fetch(leader, "b", 3)
    assert persisted_end(leader, "b") == 10
    wrote(leader, 20)
    fetch(leader, "b", 20)
    fetch(leader, "c", 15)
    assert leader.high_watermark == 15


def test_a_new_leader_starts_from_the_committed_high_watermark() -> None:
    leader = make_leader(epoch=2, durable_end=30, high_watermark=20)
    assert leader.high_watermark == 20
    fetch(leader, "b", 25, leader_history=history((1, 0), (2, 30)), last_epoch=1)
    assert leader.high_watermark == 20  # c's progress is unknown: nothing moves
    fetch(leader, "c", 22, leader_history=history((1, 0), (2, 30)), last_epoch=1)
    assert leader.high_watermark == 22


# ------------------------------------------------------------- refusals


@pytest.mark.parametrize("epoch", [1, 3])
def test_a_fetch_for_another_epoch_is_refused(epoch: int) -> None:
    leader = make_leader(epoch=2)
    verdict = fetch(leader, "b", 0, epoch=epoch, last_epoch=1)
    assert isinstance(verdict, Refuse)
    assert "epoch 2" in verdict.reason
    assert persisted_end(leader, "b") == 0


@pytest.mark.parametrize("node", ["z", "a"])
def test_a_fetch_from_a_non_member_or_the_leader_is_refused(node: str) -> None:
    leader = make_leader()
    verdict = fetch(leader, node, 0)
    assert isinstance(verdict, Refuse)
    assert node in verdict.reason


def test_a_follower_holding_a_newer_epoch_is_refused() -> None:
    leader = make_leader(epoch=2)
    wrote(leader, 10)
    verdict = fetch(leader, "b", 10, last_epoch=3)
    assert isinstance(verdict, Refuse)
    assert "epoch 3" in verdict.reason
    assert persisted_end(leader, "b") == 0
    assert leader.high_watermark == 0


# ------------------------------------------------------------- resets


def test_a_follower_below_the_log_start_resets() -> None:
    leader = make_leader()
    wrote(leader, 100)
    assert fetch(leader, "b", 10, log_start=40) == Reset(40)
    assert persisted_end(leader, "b") == 0
    assert fetch(leader, "b", 40, log_start=40) == Stream(40)
    assert persisted_end(leader, "b") == 40


# ------------------------------------------------------------- divergence


def test_a_follower_at_an_epoch_boundary_streams() -> None:
    leader = make_leader(epoch=2)
    wrote(leader, 15)
    h = history((1, 0), (2, 10))
    assert fetch(leader, "b", 10, last_epoch=1, leader_history=h) == Stream(10)
    assert fetch(leader, "c", 4, last_epoch=1, leader_history=h) == Stream(4)


def test_a_follower_holding_an_epoch_the_leader_lacks_is_truncated() -> None:
    # Leader: epoch 1 on [0, 10), epoch 3 from 10. Follower: epoch 2 began at 8 on it.
    leader = make_leader(epoch=3)
    wrote(leader, 20)
    leader_history = history((1, 0), (3, 10))
    verdict = fetch(leader, "b", 15, last_epoch=2, leader_history=leader_history)
    assert verdict == Truncate(10, 1)
    assert persisted_end(leader, "b") == 0
    own = history((1, 0), (2, 8))
    assert isinstance(verdict, Truncate)
    assert follower_cut(verdict, own, 15) == 8  # its epoch 1 ended sooner
    own.truncate_from(8)
    assert fetch(leader, "b", 8, last_epoch=own.latest_epoch,
                 leader_history=leader_history) == Stream(8)


def test_a_follower_ahead_of_the_leader_within_an_epoch_is_truncated() -> None:
    leader = make_leader(epoch=2)
    wrote(leader, 12)
    leader_history = history((1, 0), (2, 10))
    verdict = fetch(leader, "b", 15, last_epoch=2, leader_history=leader_history)
    assert verdict == Truncate(12, 2)
    assert isinstance(verdict, Truncate)
    assert follower_cut(verdict, history((1, 0), (2, 10)), 15) == 12
    # The old epoch ended here at 10; a follower holding more of it is cut there.
    verdict = fetch(leader, "c", 14, last_epoch=1, leader_history=leader_history)
    assert verdict == Truncate(10, 1)
    assert isinstance(verdict, Truncate)
    assert follower_cut(verdict, history((1, 0)), 14) == 10


def test_a_follower_whose_shared_epoch_ends_sooner_in_its_own_log_cuts_there() -> None:
    leader = make_leader(epoch=4)
    wrote(leader, 30)
    leader_history = history((1, 0), (2, 10), (4, 20))
    own = history((1, 0), (2, 10), (3, 14))
    verdict = fetch(leader, "b", 18, last_epoch=3, leader_history=leader_history)
    assert verdict == Truncate(20, 2)
    assert isinstance(verdict, Truncate)
    assert follower_cut(verdict, own, 18) == 14


def test_a_follower_that_lacks_the_shared_epoch_keeps_what_precedes_its_next_one() -> None:
    verdict = Truncate(10, 1)
    assert follower_cut(verdict, history((2, 5)), 9) == 5
    assert follower_cut(verdict, history((2, 12)), 15) == 10


def test_a_follower_without_epochs_but_with_records_is_cut_to_the_first_epoch() -> None:
    leader = make_leader()
    wrote(leader, 10)
    verdict = fetch(leader, "b", 5, last_epoch=0)
    assert verdict == Truncate(0, 0)
    assert isinstance(verdict, Truncate)
    assert follower_cut(verdict, EpochHistory(), 5) == 0
    assert fetch(leader, "b", 0, last_epoch=0) == Stream(0)


def test_follower_cut_never_passes_its_own_end() -> None:
    assert follower_cut(Truncate(50, 2), history((1, 0), (2, 10)), 30) == 30
    assert follower_cut(Truncate(50, 1), history((1, 0)), 30) == 30


# ------------------------------------------------------------- in-sync tracking

LIMITS = ReplicationLimits(lag_max_ms=1000, lag_max_messages=50)


def test_a_follower_that_stops_fetching_is_dropped_after_the_time_lag() -> None:
    leader = make_leader(limits=LIMITS)
    wrote(leader, 10)
    fetch(leader, "b", 10, now_ms=0)
    fetch(leader, "c", 10, now_ms=0)
    wrote(leader, 20)
    fetch(leader, "b", 20, now_ms=900)
    assert leader.tick(1000) is None
    fetch(leader, "b", 20, now_ms=1000)
    assert leader.tick(1001) == ("a", "b")
    assert leader.in_sync == ABC  # until the controller commits it
    assert leader.tick(1002) is None  # one change at a time
    leader.in_sync_committed(("a", "b"))
    assert list(leader.in_sync) == ["a", "b"]
    assert leader.high_watermark == 20
    assert leader.tick(1003) is None


def test_a_silent_follower_that_misses_nothing_stays_in_sync() -> None:
    leader = make_leader(limits=LIMITS)
    wrote(leader, 10)
    fetch(leader, "b", 10)
    fetch(leader, "c", 10)
    assert leader.tick(60_000) is None


def test_a_follower_too_many_messages_behind_is_dropped_at_once() -> None:
    leader = make_leader(limits=LIMITS)
    wrote(leader, 100)
    fetch(leader, "b", 100, now_ms=0)
    fetch(leader, "c", 49, now_ms=0)
    assert leader.tick(1) == ("a", "b")
    leader.in_sync_committed(("a", "b"))
    assert leader.high_watermark == 100
    assert leader.lag("c") == 51


def test_a_follower_exactly_at_the_message_bound_stays() -> None:
    leader = make_leader(limits=LIMITS)
    wrote(leader, 100)
    fetch(leader, "b", 100)
    fetch(leader, "c", 50)
    assert leader.tick(1) is None


def test_a_new_leader_gives_its_followers_a_full_lag_bound_to_show_up() -> None:
    leader = ReplicationLeader("a", 2, ABC, ABC, 10, 10, 5000, LIMITS)
    leader.leader_wrote(11)
    assert leader.tick(6000) is None
    assert leader.tick(6001) == ("a",)


def test_an_out_of_sync_follower_that_catches_up_is_added_back() -> None:
    leader = make_leader(in_sync=("a", "b"), limits=LIMITS)
    wrote(leader, 30)
    fetch(leader, "b", 30, now_ms=10)
    assert leader.high_watermark == 30
    fetch(leader, "c", 20, now_ms=10)
    assert leader.tick(10) is None  # below the high watermark
    fetch(leader, "c", 30, now_ms=20)
    assert leader.tick(20) == ABC
    leader.in_sync_committed(ABC)
    assert leader.in_sync == ABC
    assert leader.high_watermark == 30


def test_proposals_list_members_in_member_order() -> None:
    leader = make_leader(members=("c", "a", "b"), in_sync=("a",), limits=LIMITS)
    wrote(leader, 5)
    fetch(leader, "c", 5)
    fetch(leader, "b", 5)
    assert leader.tick(1) == ("a", "c", "b")


def test_one_change_is_pending_at_a_time_and_a_failure_allows_a_retry() -> None:
    leader = make_leader(in_sync=("a", "b"), limits=LIMITS)
    wrote(leader, 10)
    fetch(leader, "b", 10)
    fetch(leader, "c", 10)
    assert leader.tick(1) == ABC
    fetch(leader, "b", 10, now_ms=2000)
    assert leader.tick(2000) is None  # would drop nobody new while a change is pending
    leader.in_sync_change_failed()
    assert leader.tick(2001) == ABC
    leader.in_sync_committed(ABC)
    assert leader.tick(2002) is None


def test_a_steadily_fed_follower_that_keeps_up_stays_in_sync() -> None:
    """Under a constant publish stream a fetch never finds the leader idle: the leader
    wrote more while the follower persisted the previous response. A follower that always
    fetches up to where the leader was at its previous fetch is keeping up (Kafka's rule)."""
    leader = make_leader(limits=LIMITS)
    received = {"b": 0, "c": 0}
    for now in range(0, 10_000, 10):
        wrote(leader, leader.written_end + 5)  # publishes arrive between any two fetches
        for follower in ("b", "c"):
            assert fetch(leader, follower, received[follower], now_ms=now) == Stream(
                received[follower])
            received[follower] = leader.written_end  # the response carries it all
        assert leader.tick(now) is None, f"dropped at {now} ms"
    assert leader.in_sync == ABC
    assert leader.high_watermark == leader.written_end - 5


def test_a_follower_that_falls_behind_a_steady_stream_is_dropped() -> None:
    leader = make_leader(limits=ReplicationLimits(lag_max_ms=1000, lag_max_messages=10**9))
    b_end = c_end = 0
    proposal: tuple[str, ...] | None = None
    for now in range(0, 3000, 10):
        wrote(leader, leader.written_end + 5)
        fetch(leader, "b", b_end, now_ms=now)
        fetch(leader, "c", c_end, now_ms=now)
        b_end = leader.written_end
        c_end += 3  # c persists 3 per round while the leader writes 5
        proposal = leader.tick(now)
        if proposal is not None:
            break
    assert proposal == ("a", "b")
    assert 1000 < now < 2000


# ------------------------------------------------------------- publish refusals


def test_publishes_need_a_majority_in_sync_by_default() -> None:
    leader = make_leader()
    assert leader.publish_refusal() is None
    leader.in_sync_committed(("a", "b"))
    assert leader.publish_refusal() is None
    leader.in_sync_committed(("a",))
    reason = leader.publish_refusal()
    assert reason is not None
    assert "only 1 of the 2" in reason
    assert "a, b, c" in reason


def test_majorities_of_various_sizes() -> None:
    assert ReplicationLimits().min_in_sync_of(1) == 1
    assert ReplicationLimits().min_in_sync_of(2) == 2
    assert ReplicationLimits().min_in_sync_of(4) == 3
    assert ReplicationLimits().min_in_sync_of(5) == 3


@pytest.mark.parametrize(
    ("min_in_sync", "in_sync", "refused"),
    [
        (3, ABC, False),
        (3, ("a", "b"), True),
        (1, ("a",), False),
        (0, ("a",), False),  # at least the leader
        (7, ABC, False),  # at most every member
        (7, ("a", "b"), True),
    ],
)
def test_an_explicit_min_in_sync(min_in_sync: int, in_sync: tuple[str, ...],
                                 refused: bool) -> None:
    leader = make_leader(in_sync=in_sync, limits=ReplicationLimits(min_in_sync=min_in_sync))
    assert (leader.publish_refusal() is not None) == refused


def test_a_single_replica_queue_never_refuses() -> None:
    leader = ReplicationLeader("a", 1, ("a",), ("a",), 0, 0, 0)
    assert leader.publish_refusal() is None


# ------------------------------------------------------------- bounded state


def test_per_follower_state_does_not_grow_with_an_outage() -> None:
    leader = make_leader(limits=ReplicationLimits(lag_max_ms=1000, lag_max_messages=10**9))
    wrote(leader, 10)
    fetch(leader, "b", 10)
    fetch(leader, "c", 10)
    before = state_shape(leader)
    # c goes away for a long time; the leader writes and b follows.
    now = 0
    for _ in range(5000):
        now += 7
        wrote(leader, leader.written_end + 3)
        fetch(leader, "b", leader.written_end, now_ms=now)
        proposal = leader.tick(now)
        if proposal is not None:
            leader.in_sync_committed(proposal)
    assert leader.in_sync == ("a", "b")
    assert leader.lag("c") == 15_000
    # c comes back and catches up in many fetches.
    for offset in range(10, leader.written_end + 1, 100):
        assert fetch(leader, "c", offset, now_ms=now) == Stream(offset)
    fetch(leader, "c", leader.written_end, now_ms=now)
    proposal = leader.tick(now)
    assert proposal == ABC
    leader.in_sync_committed(proposal)
    assert state_shape(leader) == before
    progress = leader.progress("c")
    assert progress is not None
    assert (progress.persisted_end, progress.caught_up_ms, progress.fetched_ms) == (
        leader.written_end, now, now)


def test_a_follower_whose_node_is_down_is_dropped_without_waiting_out_the_lag() -> None:
    leader = make_leader(limits=LIMITS)
    wrote(leader, 10)
    fetch(leader, "b", 10, now_ms=100)
    fetch(leader, "c", 10, now_ms=100)
    leader.follower_down("c")
    assert leader.tick(101) is None  # it lacks nothing yet: nothing to wait for
    wrote(leader, 11)
    fetch(leader, "b", 11, now_ms=102)
    assert leader.tick(103) == ("a", "b")
    leader.follower_down("x")  # not a member: nothing happens


def test_acked_versions_count_for_the_in_sync_followers_only() -> None:
    leader = make_leader()
    assert leader.acked_version_in_sync(7) == -1  # no follower said anything yet
    leader.follower_acked_version("b", 7)
    leader.follower_acked_version("c", 5)
    leader.follower_acked_version("x", 9)  # not a member: ignored
    assert leader.acked_version_in_sync(7) == 5
    leader.in_sync_committed(("a", "b"))
    assert leader.acked_version_in_sync(7) == 7
    leader.in_sync_committed(("a",))
    assert leader.acked_version_in_sync(8) == 8  # alone: the leader's own version
