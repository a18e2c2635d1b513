"""The leader's per-follower pacing, quorum arithmetic and vote counting."""

from replication.raft.progress import Progress, ProgressState, VoteResult, quorum_index, tally


def test_quorum_index_is_the_highest_index_a_majority_holds() -> None:
    voters = ["a", "b", "c", "d", "e"]
    matches = {"a": 9, "b": 7, "c": 7, "d": 3, "e": 1}
    assert quorum_index(matches, voters) == 7
    assert quorum_index(matches, ["a", "b", "c", "d"]) == 7
    assert quorum_index({"a": 4, "l": 9}, ["a"]) == 4  # l is not a voter
    assert quorum_index({}, ["a", "b", "c"]) == 0


def test_tally_wins_loses_or_waits() -> None:
    voters = ["a", "b", "c", "d"]
    assert tally({"a": True, "b": True}, voters) is VoteResult.PENDING
    assert tally({"a": True, "b": True, "c": True}, voters) is VoteResult.WON
    assert tally({"a": True, "b": False, "c": False}, voters) is VoteResult.LOST
    assert tally({"a": True, "x": True, "y": True}, voters) is VoteResult.PENDING


def test_probe_sends_one_append_at_a_time() -> None:
    progress = Progress(next_index=10)
    assert not progress.is_paused(max_inflight=4)
    progress.sent_entries(12, heartbeat_round=1)
    assert progress.is_paused(max_inflight=4)
    assert progress.next_index == 10  # probing does not move ahead optimistically


def test_replicate_streams_optimistically_up_to_the_window() -> None:
    progress = Progress(match_index=5, next_index=6)
    progress.become_replicate()
    for last in (7, 9, 11):
        progress.sent_entries(last, heartbeat_round=3)
    assert progress.next_index == 12 and progress.is_paused(max_inflight=3)
    assert progress.acknowledge(9)
    assert list(progress.inflight) == [(11, 3)] and not progress.is_paused(max_inflight=3)
    assert not progress.acknowledge(8)  # a late duplicate changes nothing
    assert progress.match_index == 9


def test_a_heartbeat_answered_after_an_unacknowledged_append_means_it_was_lost() -> None:
    progress = Progress(match_index=5, next_index=6)
    progress.become_replicate()
    progress.sent_entries(8, heartbeat_round=4)
    assert not progress.lost_append(4)  # that heartbeat left before the append
    assert progress.lost_append(5)


def test_rejections_move_next_back_but_never_below_the_match() -> None:
    progress = Progress(match_index=5, next_index=6)
    progress.become_replicate()
    progress.sent_entries(20, heartbeat_round=0)
    assert not progress.reject(4, next_guess=2)  # older than what was acknowledged
    assert progress.reject(20, next_guess=3)
    assert progress.state is ProgressState.PROBE and progress.next_index == 6
    assert not progress.reject(15, next_guess=7)  # answers an earlier probe
    progress.next_index = 12
    assert progress.reject(11, next_guess=9)
    assert progress.next_index == 9


def test_snapshot_state_ignores_rejections_and_waits() -> None:
    progress = Progress(match_index=1, next_index=2)
    progress.become_snapshot(40)
    assert progress.is_paused(max_inflight=100)
    assert not progress.reject(1, next_guess=1)
    assert progress.acknowledge(40) and progress.next_index == 41
