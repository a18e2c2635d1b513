"""Queue placement: strategy precedence, leader choice, replica sets (rules in the module doc)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from logbroker.queue_placement import (
    AllReplicas,
    NodeReplicas,
    NodeView,
    Placement,
    PlacementError,
    ReplicaCount,
    desired_member_count,
    locator_strategy,
    place_queue,
    replica_count_or_nodes,
)

THREE = (NodeView("n1", True), NodeView("n2", True), NodeView("n3", True))


def place(
    strategy: str = "client-local",
    local: str = "n1",
    nodes: Sequence[NodeView] = THREE,
    leaders: Mapping[str, int] | None = None,
    members: Mapping[str, int] | None = None,
    arguments: Mapping[str, Any] | None = None,
    policy: Mapping[str, Any] | None = None,
    seed: int = 7,
    exclusive: bool = False,
) -> Placement:
    return place_queue(
        strategy=strategy,
        local_node=local,
        nodes=nodes,
        leader_counts=leaders or {},
        member_counts=members or {},
        arguments=arguments or {},
        policy_definition=policy or {},
        rng=random.Random(seed),
        exclusive=exclusive,
    )


# -- strategy precedence ----------------------------------------------------


def test_config_default_applies_when_nothing_else_is_set() -> None:
    assert locator_strategy({}, {}, "client-local") == "client-local"
    assert locator_strategy({}, {}, "random") == "random"


@pytest.mark.parametrize(
    ("arguments", "policy", "expected"),
    [
        ({"x-queue-leader-locator": "balanced"}, {}, "balanced"),
        ({"x-queue-master-locator": "min-masters"}, {}, "balanced"),
        ({}, {"queue-leader-locator": "random"}, "random"),
        ({}, {"queue-master-locator": "client-local"}, "client-local"),
        # the policy wins over the argument (rabbit_queue_location, DESIGN.md 6)
        ({"x-queue-leader-locator": "random"}, {"queue-leader-locator": "balanced"}, "balanced"),
        ({"x-queue-master-locator": "random"}, {"queue-master-locator": "client-local"},
         "client-local"),
        # leader-locator keys before master-locator keys, from either source
        ({"x-queue-leader-locator": "random"}, {"queue-master-locator": "balanced"}, "random"),
        ({"x-queue-master-locator": "random", "x-queue-leader-locator": "client-local"}, {},
         "client-local"),
        ({}, {"queue-master-locator": "random", "queue-leader-locator": "least-leaders"},
         "balanced"),
    ],
)  # fmt: skip
def test_policy_then_argument_then_config(
    arguments: dict[str, Any], policy: dict[str, Any], expected: str
) -> None:
    assert locator_strategy(arguments, policy, "client-local") == expected


@pytest.mark.parametrize(
    ("arguments", "policy", "config", "message"),
    [
        ({"x-queue-leader-locator": "nearest"}, {}, "client-local",
         "invalid queue leader locator 'nearest' in argument 'x-queue-leader-locator': expected "
         "one of 'client-local', 'balanced', 'random' ('min-masters', 'least-leaders' mean "
         "'balanced')"),
        ({}, {"queue-master-locator": 3}, "client-local",
         "invalid queue leader locator 3 in policy key 'queue-master-locator': must be a string"),
        ({}, {}, "everywhere",
         "invalid queue leader locator 'everywhere' in configuration 'queue_leader_locator'"),
        # an overridden argument is still refused: the declare would be anyway
        ({"x-queue-leader-locator": "Balanced"}, {"queue-leader-locator": "random"}, "random",
         "invalid queue leader locator 'Balanced' in argument 'x-queue-leader-locator'"),
    ],
)  # fmt: skip
def test_unknown_strategies_are_refused_with_their_source(
    arguments: dict[str, Any], policy: dict[str, Any], config: str, message: str
) -> None:
    with pytest.raises(PlacementError) as caught:
        locator_strategy(arguments, policy, config)
    assert str(caught.value).startswith(message)


def test_place_queue_refuses_an_unknown_strategy() -> None:
    with pytest.raises(PlacementError, match="invalid queue leader locator 'closest'"):
        place(strategy="closest")
    assert place(strategy="min-masters", leaders={"n1": 1}) == Placement("n2", ("n2",))


# -- leader strategies ------------------------------------------------------


def test_client_local_picks_the_declaring_node() -> None:
    assert place("client-local", local="n2", leaders={"n2": 50}) == Placement("n2", ("n2",))


def test_balanced_picks_the_node_with_fewest_leaders() -> None:
    assert place("balanced", leaders={"n1": 3, "n2": 1, "n3": 2}) == Placement("n2", ("n2",))


def test_balanced_ties_go_to_the_local_node_then_to_the_lowest_name() -> None:
    assert place("balanced", local="n3", leaders={"n1": 1, "n2": 1, "n3": 1}).leader == "n3"
    assert place("balanced", local="n1", leaders={"n1": 2, "n2": 1, "n3": 1}).leader == "n2"
    # nodes missing from the counts lead nothing
    assert place("balanced", local="n1", leaders={"n1": 1}).leader == "n2"


def test_balanced_spreads_thirty_queues_ten_per_node() -> None:
    leaders: Counter[str] = Counter()
    for index in range(30):
        local = ("n1", "n2", "n3")[index % 2]  # declared on n1 and n2 only
        placement = place("balanced", local=local, leaders=leaders)
        leaders[placement.leader] += 1
    assert leaders == {"n1": 10, "n2": 10, "n3": 10}


def test_random_chooses_among_up_nodes_with_the_given_rng() -> None:
    seen = {place("random", seed=seed).leader for seed in range(50)}
    assert seen == {"n1", "n2", "n3"}
    nodes = (*THREE, NodeView("n4", False))
    for seed in range(50):
        assert place("random", nodes=nodes, seed=seed).leader != "n4"


def test_placement_is_deterministic_given_the_seed() -> None:
    policy = {"ha-mode": "exactly", "ha-params": 2}
    first = [place("random", seed=seed, policy=policy) for seed in range(20)]
    again = [place("random", seed=seed, policy=policy) for seed in range(20)]
    assert first == again
    rng = random.Random(3)
    expected = random.Random(3).choice(["n1", "n2", "n3"])
    assert place_queue(
        strategy="random", local_node="n1", nodes=THREE, leader_counts={}, member_counts={},
        arguments={}, policy_definition={}, rng=rng,
    ).leader == expected  # fmt: skip


# -- down nodes -------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["client-local", "balanced", "random"])
def test_down_nodes_are_never_chosen(strategy: str) -> None:
    nodes = (NodeView("n1", True), NodeView("n2", False), NodeView("n3", False))
    for seed in range(30):
        placement = place(strategy, nodes=nodes, leaders={"n1": 9}, seed=seed,
                          policy={"ha-mode": "all"})  # fmt: skip
        assert placement == Placement("n1", ("n1",))
    for seed in range(30):
        placement = place(strategy, nodes=(*nodes, NodeView("n4", True)), leaders={"n1": 9},
                          seed=seed, arguments={"x-queue-replicas": 3})  # fmt: skip
        assert set(placement.members) == {"n1", "n4"}


def test_the_local_node_counts_as_up_even_if_the_view_says_down() -> None:
    nodes = (NodeView("n1", False), NodeView("n2", True), NodeView("n3", True))
    assert place("client-local", nodes=nodes).leader == "n1"
    assert place("balanced", nodes=nodes).leader == "n1"
    assert place("balanced", nodes=nodes, arguments={"x-queue-replicas": 3}).members == (
        "n1", "n2", "n3",
    )  # fmt: skip


def test_the_local_node_need_not_be_in_the_view() -> None:
    assert place("client-local", local="n9").leader == "n9"
    assert place("balanced", local="n9", leaders={"n1": 1, "n2": 1, "n3": 1}).leader == "n9"


def test_a_single_node_cluster_always_places_locally() -> None:
    for policy in ({}, {"ha-mode": "all"}, {"ha-mode": "exactly", "ha-params": 3},
                   {"ha-mode": "nodes", "ha-params": ["other"]}):  # fmt: skip
        for strategy in ("client-local", "balanced", "random"):
            assert place(strategy, local="solo", nodes=[NodeView("solo", True)], policy=policy,
                         arguments={"x-queue-replicas": 5}) == Placement("solo", ("solo",))
    assert place("random", local="solo", nodes=[]) == Placement("solo", ("solo",))


# -- replicas ---------------------------------------------------------------


def test_without_a_replication_setting_only_the_leader_holds_the_queue() -> None:
    assert replica_count_or_nodes({}, {}) == ReplicaCount(1)
    assert place("balanced", leaders={"n1": 1}).members == ("n2",)


def test_x_queue_replicas_counts_the_leader_and_spreads_by_fewest_members() -> None:
    assert replica_count_or_nodes({"x-queue-replicas": 2}, {}).count == 2  # type: ignore[union-attr]
    placement = place("client-local", arguments={"x-queue-replicas": 2},
                      members={"n1": 5, "n2": 4, "n3": 1})  # fmt: skip
    assert placement == Placement("n1", ("n1", "n3"))
    tied = place("client-local", arguments={"x-queue-replicas": 2}, members={"n2": 1, "n3": 1})
    assert tied.members == ("n1", "n2")


def test_ha_mode_exactly_gives_count_replicas_capped_at_the_nodes() -> None:
    policy = {"ha-mode": "exactly", "ha-params": 2}
    assert replica_count_or_nodes({}, policy) == ReplicaCount(2, "policy 'ha-mode' \"exactly\"")
    assert place("client-local", local="n2", policy=policy) == Placement("n2", ("n2", "n1"))
    big = {"ha-mode": "exactly", "ha-params": 7}
    assert place("client-local", local="n2", policy=big) == Placement("n2", ("n2", "n1", "n3"))


def test_ha_mode_all_places_a_replica_on_every_up_node() -> None:
    assert replica_count_or_nodes({}, {"ha-mode": "all"}) == AllReplicas()
    placement = place("balanced", leaders={"n1": 1, "n2": 0, "n3": 1},
                      members={"n1": 0, "n3": 2}, policy={"ha-mode": "all"})  # fmt: skip
    assert placement == Placement("n2", ("n2", "n1", "n3"))
    nodes = (*THREE, NodeView("n4", False))
    assert place("client-local", nodes=nodes, policy={"ha-mode": "all"}).members == (
        "n1", "n2", "n3",
    )  # fmt: skip


def test_the_ha_policy_wins_over_x_queue_replicas() -> None:
    arguments = {"x-queue-replicas": 3}
    policy = {"ha-mode": "exactly", "ha-params": 1}
    assert replica_count_or_nodes(arguments, policy) == ReplicaCount(
        1, "policy 'ha-mode' \"exactly\""
    )
    assert place(arguments=arguments, policy=policy).members == ("n1",)


def test_ha_mode_nodes_places_the_leader_and_replicas_on_the_listed_nodes() -> None:
    policy = {"ha-mode": "nodes", "ha-params": ["n3", "n2", "not-in-cluster"]}
    assert replica_count_or_nodes({}, policy) == NodeReplicas(("n3", "n2", "not-in-cluster"))
    # client-local on a listed node stays local
    assert place("client-local", local="n3", policy=policy) == Placement("n3", ("n3", "n2"))
    # client-local on an unlisted node: the policy wins, lowest listed name
    assert place("client-local", local="n1", policy=policy) == Placement("n2", ("n2", "n3"))
    # balanced among the listed nodes only, even when n1 leads nothing
    placement = place("balanced", policy=policy, leaders={"n1": 0, "n2": 5, "n3": 4})
    assert placement == Placement("n3", ("n3", "n2"))
    for seed in range(30):
        assert place("random", policy=policy, seed=seed).leader in ("n2", "n3")


def test_ha_mode_nodes_skips_listed_nodes_that_are_down() -> None:
    policy = {"ha-mode": "nodes", "ha-params": ["n2", "n3"]}
    nodes = (NodeView("n1", True), NodeView("n2", False), NodeView("n3", True))
    for strategy in ("client-local", "balanced", "random"):
        assert place(strategy, nodes=nodes, policy=policy) == Placement("n3", ("n3",))


def test_ha_mode_nodes_with_no_listed_node_up_declares_on_the_local_node() -> None:
    """Seed 002: "the queue will be created on the node that the declaring client is
    connected to"."""
    policy = {"ha-mode": "nodes", "ha-params": ["n2", "n3", "n9"]}
    nodes = (NodeView("n1", True), NodeView("n2", False), NodeView("n3", False))
    for strategy in ("client-local", "balanced", "random"):
        assert place(strategy, nodes=nodes, policy=policy,
                     leaders={"n1": 100}) == Placement("n1", ("n1",))  # fmt: skip


def test_exclusive_queues_are_local_and_never_replicated() -> None:
    for policy in ({"ha-mode": "all"}, {"ha-mode": "nodes", "ha-params": ["n2"]}):
        assert place("balanced", local="n1", leaders={"n1": 9}, policy=policy,
                     exclusive=True) == Placement("n1", ("n1",))  # fmt: skip


def test_desired_member_count() -> None:
    cluster = ["n1", "n2", "n3"]
    assert desired_member_count(ReplicaCount(1), cluster) == 1
    assert desired_member_count(ReplicaCount(5), cluster) == 3
    assert desired_member_count(AllReplicas(), cluster) == 3
    assert desired_member_count(NodeReplicas(("n2", "n9")), cluster) == 1
    assert desired_member_count(NodeReplicas(("n8", "n9")), cluster) == 1


# -- invalid replication settings -------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "policy", "message"),
    [
        ({"x-queue-replicas": 0}, {},
         "invalid argument 'x-queue-replicas': 0; expected an integer >= 1"),
        ({"x-queue-replicas": True}, {},
         "invalid argument 'x-queue-replicas': True; expected an integer >= 1"),
        ({"x-queue-replicas": "3"}, {},
         "invalid argument 'x-queue-replicas': '3'; expected an integer >= 1"),
        ({}, {"ha-mode": "some"},
         "invalid policy 'ha-mode' 'some': expected \"all\", \"exactly\" or \"nodes\""),
        ({}, {"ha-mode": "exactly"},
         "policy 'ha-mode' \"exactly\" takes an integer 'ha-params' >= 1 (the number of "
         "replicas, leader included), none given"),
        ({}, {"ha-mode": "exactly", "ha-params": 0},
         "policy 'ha-mode' \"exactly\" takes an integer 'ha-params' >= 1"),
        ({}, {"ha-mode": "exactly", "ha-params": "2"},
         "policy 'ha-mode' \"exactly\" takes an integer 'ha-params' >= 1"),
        ({}, {"ha-mode": "all", "ha-params": 2},
         "policy 'ha-mode' \"all\" does not take 'ha-params'"),
        ({}, {"ha-mode": "nodes", "ha-params": []},
         "policy 'ha-mode' \"nodes\" takes a non-empty list of node names as 'ha-params', [] "
         "given"),
        ({}, {"ha-mode": "nodes", "ha-params": "n1"},
         "policy 'ha-mode' \"nodes\" takes a non-empty list of node names"),
        ({}, {"ha-mode": "nodes", "ha-params": ["n1", 2, ""]},
         "policy 'ha-mode' \"nodes\": 'ha-params' must hold node names, [2, ''] are not"),
        ({}, {"ha-params": 2}, "policy key 'ha-params' needs 'ha-mode'"),
        # a bad argument is refused even where the policy overrides it
        ({"x-queue-replicas": -1}, {"ha-mode": "all"},
         "invalid argument 'x-queue-replicas': -1"),
    ],
)  # fmt: skip
def test_invalid_replication_settings_are_refused(
    arguments: dict[str, Any], policy: dict[str, Any], message: str
) -> None:
    with pytest.raises(PlacementError) as caught:
        replica_count_or_nodes(arguments, policy)
    assert str(caught.value).startswith(message)
    with pytest.raises(PlacementError):
        place(arguments=arguments, policy=policy)
    with pytest.raises(PlacementError):  # even for a queue that would not be replicated
        place(arguments=arguments, policy=policy, exclusive=True)


def test_placement_error_is_a_value_error() -> None:
    assert issubclass(PlacementError, ValueError)
