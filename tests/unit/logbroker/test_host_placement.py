"""Host-aware placement (issue 28): a queue's copies go to different hosts, then zones, and
share a host (on different workers) only when there are not enough hosts."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.queue_placement import NodeView, ReplicaCount, place_queue, spread_copies
from logbroker.replica_moves import next_step, wanted_members


def workers(host: str, count: int, zone: str = "", up: bool = True) -> list[NodeView]:
    """The `count` workers of one `serve --workers N` host: HOST, HOST-w2, ..."""
    return [NodeView(host if k == 1 else f"{host}-w{k}", up, host, zone)
            for k in range(1, count + 1)]


def place(nodes: Sequence[NodeView], replicas: int, local: str,
          members: Mapping[str, int] | None = None) -> tuple[str, ...]:
    return place_queue(strategy="client-local", local_node=local, nodes=nodes,
                       leader_counts={}, member_counts=members or {},
                       arguments={"x-queue-replicas": replicas}, policy_definition={},
                       rng=random.Random(1)).members


def hosts_of(members: Sequence[str], nodes: Sequence[NodeView]) -> list[str]:
    by_name = {node.name: node for node in nodes}
    return [by_name[name].machine for name in members]


def test_two_copies_go_to_two_hosts_even_when_the_local_host_has_idle_workers() -> None:
    nodes = workers("hA", 4) + workers("hB", 4)
    members = place(nodes, 2, local="hA")
    assert members[0] == "hA"
    assert hosts_of(members, nodes) == ["hA", "hB"]


def test_the_least_loaded_worker_of_the_other_host_gets_the_copy() -> None:
    nodes = workers("hA", 2) + workers("hB", 2)
    members = place(nodes, 2, local="hA", members={"hB": 5, "hB-w2": 1, "hA-w2": 0})
    assert members == ("hA", "hB-w2")


def test_three_copies_on_three_hosts_before_any_host_holds_two() -> None:
    nodes = workers("hA", 3) + workers("hB", 3) + workers("hC", 1)
    members = place(nodes, 3, local="hB-w2")
    assert sorted(hosts_of(members, nodes)) == ["hA", "hB", "hC"]
    four = place(nodes, 4, local="hB-w2")
    assert Counter(hosts_of(four, nodes)) == {"hA": 2, "hB": 1, "hC": 1}  # hA: by name
    six = place(nodes, 6, local="hB-w2")
    assert Counter(hosts_of(six, nodes)) == {"hA": 3, "hB": 2, "hC": 1} or \
        Counter(hosts_of(six, nodes)) == {"hA": 2, "hB": 3, "hC": 1}


def test_zones_spread_before_hosts_of_the_same_zone() -> None:
    nodes = workers("hA", 1, "z1") + workers("hB", 1, "z1") + workers("hC", 1, "z2")
    members = place(nodes, 2, local="hA")
    assert members == ("hA", "hC")  # hB is another host, but in the leader's zone
    assert place(nodes, 3, local="hA") == ("hA", "hC", "hB")


def test_one_host_falls_back_to_its_workers_never_twice_on_one() -> None:
    nodes = workers("hA", 3)
    members = place(nodes, 3, local="hA-w2")
    assert sorted(members) == ["hA", "hA-w2", "hA-w3"]
    assert place(nodes, 5, local="hA") == ("hA", "hA-w2", "hA-w3")  # capped at the workers


def test_down_hosts_get_no_copy() -> None:
    nodes = workers("hA", 2) + workers("hB", 2, up=False)
    assert hosts_of(place(nodes, 2, local="hA"), nodes) == ["hA", "hA"]


def test_members_without_a_host_are_each_a_host_of_their_own() -> None:
    nodes = [NodeView("n1", True), NodeView("n2", True), NodeView("n3", True)]
    assert place(nodes, 2, local="n1", members={"n2": 3}) == ("n1", "n3")


def test_spread_copies_keeps_the_chosen_and_the_order_within_a_tier() -> None:
    nodes = workers("hA", 2) + workers("hB", 2)
    assert spread_copies(["hA"], ["hA-w2", "hB-w2", "hB"], 3, nodes) == ("hA", "hB-w2", "hA-w2")
    assert spread_copies(["hA", "hA"], ["hA"], 3, nodes) == ("hA",)
    assert spread_copies([], ["unknown", "hA"], 2, nodes) == ("unknown", "hA")


def test_a_replica_move_takes_a_copy_off_a_shared_host() -> None:
    nodes = workers("hA", 2) + workers("hB", 1)
    spec = ReplicaCount(2)
    # Both copies on hA (placed while hB was away): hB joins, then is synced, then the
    # copy on hA-w2 goes.
    step = next_step(spec, "hA", ("hA", "hA-w2"), ("hA", "hA-w2"), nodes, {})
    assert step is not None and step.kind == "add" and step.members == ("hA", "hA-w2", "hB")
    step = next_step(spec, "hA", ("hA", "hA-w2", "hB"), ("hA", "hA-w2"), nodes, {})
    assert step is not None and step.kind == "sync"
    step = next_step(spec, "hA", ("hA", "hA-w2", "hB"), ("hA", "hA-w2", "hB"), nodes, {})
    assert step is not None and step.kind == "drop" and step.members == ("hA", "hB")
    assert next_step(spec, "hA", ("hA", "hB"), ("hA", "hB"), nodes, {}) is None


def test_a_down_member_is_kept_and_a_live_one_on_the_same_host_not_dropped_for_it() -> None:
    nodes = workers("hA", 2) + workers("hB", 1, up=False)
    spec = ReplicaCount(2)
    assert wanted_members(spec, "hA", ("hA", "hB"), ("hA", "hB"), nodes, {}) == ("hA", "hB")
    # A down copy elsewhere does not push out an in-sync one on the leader's host.
    assert wanted_members(spec, "hA", ("hA", "hA-w2", "hB"), ("hA", "hA-w2"), nodes, {}) \
        == ("hA", "hA-w2")


HOSTS = st.lists(st.tuples(st.integers(1, 4), st.sampled_from(["", "z1", "z2"]),
                           st.booleans()), min_size=1, max_size=5)


@settings(max_examples=200, deadline=None)
@given(HOSTS, st.integers(1, 6), st.randoms(use_true_random=False))
def test_no_host_holds_two_copies_while_an_up_host_holds_none(
        layout: list[tuple[int, str, bool]], replicas: int, rng: random.Random) -> None:
    nodes = [node for index, (count, zone, up) in enumerate(layout)
             for node in workers(f"h{index}", count, zone, up)]
    local = rng.choice([node.name for node in nodes if node.up] or [nodes[0].name])
    members = place(nodes, replicas, local)
    assert len(set(members)) == len(members)  # never two copies on one worker
    assert members[0] == local
    by_name = {node.name: node for node in nodes}
    up_hosts = {node.machine for node in nodes if node.up or node.name == local}
    used = Counter(hosts_of(members, nodes))
    if max(used.values()) > 1:
        assert set(used) == up_hosts  # a host holds two only when every up host holds one
    zones_used = {by_name[m].zone for m in members}
    free_zone = {node.zone for node in nodes if node.up and node.zone} - zones_used
    if free_zone:  # a zone was left out only because the count was met first
        assert len(members) == min(replicas, len([n for n in nodes if n.up or n.name == local]))


def test_a_removed_member_is_replaced_on_a_host_without_a_copy() -> None:
    nodes = workers("hA", 2) + workers("hC", 1)  # hB was removed from the cluster
    spec = ReplicaCount(2)
    # hA-w2 is on the leader's host and less loaded, but hC has no copy.
    assert wanted_members(spec, "hA", ("hA", "hB"), ("hA", "hB"), nodes, {"hC": 9},
                          removed=("hB",)) == ("hA", "hC")
    step = next_step(spec, "hA", ("hA", "hB"), ("hA", "hB"), nodes, {}, removed=("hB",))
    assert step is not None and step.kind == "add" and step.members == ("hA", "hB", "hC")
    step = next_step(spec, "hA", ("hA", "hB", "hC"), ("hA", "hB"), nodes, {}, ("hB",))
    assert step is not None and step.kind == "sync"
    step = next_step(spec, "hA", ("hA", "hB", "hC"), ("hA", "hB", "hC"), nodes, {}, ("hB",))
    assert step is not None and step.kind == "drop" and step.members == ("hA", "hC")


def test_a_member_missing_from_the_nodes_but_not_removed_is_kept_like_a_down_one() -> None:
    nodes = workers("hA", 2) + workers("hC", 1)
    spec = ReplicaCount(2)
    assert wanted_members(spec, "hA", ("hA", "hB"), ("hA", "hB"), nodes, {}) == ("hA", "hB")
