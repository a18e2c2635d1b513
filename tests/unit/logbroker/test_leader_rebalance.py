"""plan_rebalance: moves replicated queue leaders until no node leads two more than another."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

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


# Hosts (issue 28): the workers of one `serve --workers N` are nodes of one host.
HOSTS = {"a1": "hA", "a2": "hA", "b1": "hB", "b2": "hB"}


def host_totals(start: list[LedQueue], moves: list[LeaderMove],
                hosts: dict[str, str]) -> Counter[str]:
    totals: Counter[str] = Counter()
    for node, count in leaders_after(start, moves).items():
        totals[hosts.get(node, node)] += count
    return totals


def test_hosts_even_out_before_workers() -> None:
    # 3, 3, 2, 2 per worker is balanced worker by worker, not host by host (6 to 4).
    start = [LedQueue("/", f"q{i}", leader, ("a1", "a2", "b1", "b2"))
             for i, leader in enumerate(["a1"] * 3 + ["a2"] * 3 + ["b1"] * 2 + ["b2"] * 2)]
    assert plan_rebalance(start, HOSTS) == []  # without hosts: nothing to do
    assert plan_rebalance(start, HOSTS, HOSTS) == [LeaderMove("/", "q0", "a1", "b1")]


def test_a_host_sheds_to_the_other_host_then_its_workers_even_out() -> None:
    # Copies on both hosts (host-aware placement), all led by a1.
    start = [LedQueue("/", f"q{i}", "a1", ("a1", "b1" if i % 2 else "b2", "a2"))
             for i in range(8)]
    moves = plan_rebalance(start, HOSTS, HOSTS)
    assert host_totals(start, moves, HOSTS) == {"hA": 4, "hB": 4}
    assert leaders_after(start, moves) == {"a1": 2, "a2": 2, "b1": 2, "b2": 2}
    # Moves off the host come first, to the other host's least busy worker.
    assert [HOSTS[m.target] for m in moves[:4]] == ["hB"] * 4


def test_a_host_with_more_live_workers_takes_a_larger_share() -> None:
    hosts = {"a1": "hA", "a2": "hA", "a3": "hA", "b1": "hB"}
    start = [LedQueue("/", f"q{i}", "b1", ("b1", f"a{1 + i % 3}")) for i in range(8)]
    moves = plan_rebalance(start, hosts, hosts)
    assert host_totals(start, moves, hosts) == {"hA": 6, "hB": 2}  # 2 per worker


def test_nodes_that_are_each_their_own_host_plan_as_without_hosts() -> None:
    start = [*queues(7), LedQueue("/", "x", "n2", ("n2", "n3"))]
    own = {"n1": "n1", "n2": "", "n3": "h3"}  # "" or missing: a host of its own
    assert plan_rebalance(start, ALL, own) == plan_without_hosts(start, ALL)


# The rule as it was before hosts, kept here as the reference the host-aware plan must
# reproduce when every node is its own host.
def plan_without_hosts(queues: Sequence[LedQueue], live_nodes: Iterable[str]
                       ) -> list[LeaderMove]:
    live = sorted(set(live_nodes))
    counts = {node: 0 for node in live}
    leaders = {(q.vhost, q.name): q.leader for q in queues}
    for queue in queues:
        if queue.leader in counts:
            counts[queue.leader] += 1
    moves: list[LeaderMove] = []
    by_key = {(q.vhost, q.name): q for q in queues}
    for _ in range(10_000):
        move = _one_move_without_hosts(by_key, leaders, counts)
        if move is None:
            break
        moves.append(move)
        leaders[(move.vhost, move.name)] = move.target
        counts[move.source] -= 1
        counts[move.target] += 1
    return moves


def _one_move_without_hosts(by_key: dict[tuple[str, str], LedQueue],
                            leaders: dict[tuple[str, str], str],
                            counts: dict[str, int]) -> LeaderMove | None:
    for source in sorted(counts, key=lambda n: (-counts[n], n)):
        for key in sorted(k for k, leader in leaders.items() if leader == source):
            queue = by_key[key]
            targets = [n for n in queue.in_sync
                       if n in counts and n != source and counts[n] + 1 < counts[source]]
            if targets:
                target = min(targets, key=lambda n: (counts[n], n))
                return LeaderMove(queue.vhost, queue.name, source, target)
    return None


NODES = ("n1", "n2", "n3", "n4")
LED = st.lists(st.tuples(st.sampled_from(NODES), st.sets(st.sampled_from(NODES))),
               max_size=25)


@settings(max_examples=200, deadline=None)
@given(LED, st.sets(st.sampled_from(NODES), min_size=1))
def test_every_node_its_own_host_plans_exactly_as_before(
        led: list[tuple[str, set[str]]], live: set[str]) -> None:
    start = [LedQueue("/", f"q{i}", leader, tuple(sorted(in_sync | {leader})))
             for i, (leader, in_sync) in enumerate(led)]
    own = {node: node for node in NODES}
    assert plan_rebalance(start, live, own) == plan_without_hosts(start, live)


@settings(max_examples=200, deadline=None)
@given(LED, st.sets(st.sampled_from(NODES), min_size=1))
def test_with_hosts_no_move_is_left_that_evens_hosts_or_workers(
        led: list[tuple[str, set[str]]], live: set[str]) -> None:
    hosts = {"n1": "hA", "n2": "hA", "n3": "hB", "n4": "hB"}
    start = [LedQueue("/", f"q{i}", leader, tuple(sorted(in_sync | {leader})))
             for i, (leader, in_sync) in enumerate(led)]
    moves = plan_rebalance(start, live, hosts)
    after = [LedQueue(q.vhost, q.name, leader, q.in_sync) for q, leader in zip(
        start, _leaders(start, moves), strict=True)]
    assert plan_rebalance(after, live, hosts) == []  # a fixed point
    assert all(m.target in live and m.target in by_name(start)[m.name].in_sync
               for m in moves)


def _leaders(start: list[LedQueue], moves: list[LeaderMove]) -> Iterable[str]:
    leaders = {q.name: q.leader for q in start}
    for move in moves:
        leaders[move.name] = move.target
    return [leaders[q.name] for q in start]


def by_name(start: list[LedQueue]) -> dict[str, LedQueue]:
    return {q.name: q for q in start}
