"""plan_rebalance: moves replicated queue leaders until no node leads two more than another."""

from __future__ import annotations

from collections import Counter

from logbroker.leader_rebalance import LeaderMove, LedQueue, plan_rebalance

ALL = ("n1", "n2", "n3")


def queues(count: int, leader: str = "n1", in_sync: tuple[str, ...] = ALL) -> list[LedQueue]:
    return [LedQueue("/", f"q{i}", leader, in_sync) for i in range(count)]


def leaders_after(start: list[LedQueue], moves: list[LeaderMove]) -> Counter[str]:
    leaders = {(q.vhost, q.name): q.leader for q in start}
    for move in moves:
        assert leaders[(move.vhost, move.name)] == move.source
        leaders[(move.vhost, move.name)] = move.target
    return Counter(leaders.values())


def test_six_queues_on_one_node_end_two_each() -> None:
    start = queues(6)
    moves = plan_rebalance(start, ALL)
    assert leaders_after(start, moves) == {"n1": 2, "n2": 2, "n3": 2}
    assert len(moves) == 4


def test_balanced_already_moves_nothing() -> None:
    start = [LedQueue("/", f"q{i}", ALL[i % 3], ALL) for i in range(7)]
    assert plan_rebalance(start, ALL) == []


def test_only_in_sync_members_that_are_up_may_lead() -> None:
    start = queues(4, in_sync=("n1", "n2"))
    moves = plan_rebalance(start, ALL)
    assert leaders_after(start, moves) == {"n1": 2, "n2": 2}
    assert plan_rebalance(start, ("n1", "n3")) == []  # n2 is down, n3 not in sync


def test_the_plan_is_deterministic() -> None:
    start = queues(5) + queues(0)
    assert plan_rebalance(start, ALL) == plan_rebalance(list(start), reversed(ALL))
