"""choose_leader: the seeds' promotion rule, and out-of-sync promotion only when allowed."""

from __future__ import annotations

import itertools

import pytest

from replication.queue.failover import Promotion, ReplicaStatus, choose_leader


def status(node: str, log_end: int, last_epoch: int = 3, started_ms: int = 1000) -> ReplicaStatus:
    return ReplicaStatus(node, log_end, last_epoch, started_ms)


def test_the_in_sync_follower_with_the_highest_log_end_wins() -> None:
    statuses = [status("b", 10), status("c", 12), status("d", 11)]
    promotion = choose_leader("a", ["a", "b", "c", "d"], statuses, promote_out_of_sync=False)
    assert promotion == Promotion("c", ("c", "b", "d"), out_of_sync=False)


def test_a_tie_goes_to_the_longest_running_node() -> None:
    statuses = [status("b", 12, started_ms=500), status("c", 12, started_ms=200),
                status("d", 12, started_ms=900)]
    promotion = choose_leader("a", ["a", "b", "c", "d"], statuses, False)
    assert promotion is not None
    assert promotion.leader == "c"
    assert promotion.in_sync == ("c", "b", "d")


def test_a_full_tie_goes_to_the_smallest_name() -> None:
    statuses = [status("d", 12), status("b", 12), status("c", 12)]
    promotion = choose_leader("a", ["a", "b", "c", "d"], statuses, False)
    assert promotion == Promotion("b", ("b", "c", "d"), out_of_sync=False)


def test_the_choice_does_not_depend_on_the_order_of_the_reports() -> None:
    statuses = [status("b", 12, started_ms=5), status("c", 12, started_ms=5),
                status("d", 11, started_ms=1), status("e", 12, started_ms=7)]
    members = ["a", "b", "c", "d", "e"]
    results = {choose_leader("a", members, list(order), False)
               for order in itertools.permutations(statuses)}
    assert results == {Promotion("b", ("b", "c", "d", "e"), out_of_sync=False)}


def test_the_old_leader_is_never_chosen_even_if_it_answers() -> None:
    statuses = [status("a", 99, started_ms=0), status("b", 10)]
    promotion = choose_leader("a", ["a", "b"], statuses, False)
    assert promotion == Promotion("b", ("b",), out_of_sync=False)


def test_in_sync_replicas_that_did_not_answer_leave_the_in_sync_set() -> None:
    promotion = choose_leader("a", ["a", "b", "c"], [status("c", 4)], False)
    assert promotion == Promotion("c", ("c",), out_of_sync=False)


def test_an_in_sync_replica_beats_an_out_of_sync_one_holding_more() -> None:
    statuses = [status("b", 5, last_epoch=3), status("c", 50, last_epoch=9)]
    for allowed in (False, True):
        promotion = choose_leader("a", ["a", "b"], statuses, allowed)
        assert promotion == Promotion("b", ("b",), out_of_sync=False)


def test_out_of_sync_replicas_are_not_promoted_by_default() -> None:
    statuses = [status("b", 5), status("c", 50)]
    assert choose_leader("a", ["a"], statuses, promote_out_of_sync=False) is None


def test_out_of_sync_promotion_prefers_the_latest_epoch_then_the_log_end() -> None:
    statuses = [status("b", 50, last_epoch=2), status("c", 20, last_epoch=4),
                status("d", 30, last_epoch=4)]
    promotion = choose_leader("a", ["a"], statuses, promote_out_of_sync=True)
    assert promotion == Promotion("d", ("d",), out_of_sync=True)


def test_out_of_sync_ties_go_to_the_longest_running_then_the_name() -> None:
    statuses = [status("d", 30, 4, started_ms=9), status("c", 30, 4, started_ms=1),
                status("b", 30, 4, started_ms=1)]
    promotion = choose_leader("a", ["a"], statuses, promote_out_of_sync=True)
    assert promotion == Promotion("b", ("b",), out_of_sync=True)


@pytest.mark.parametrize("allowed", [False, True])
def test_nobody_to_promote(allowed: bool) -> None:
    assert choose_leader("a", ["a", "b"], [], allowed) is None
    assert choose_leader("a", ["a", "b"], [status("a", 10)], allowed) is None
