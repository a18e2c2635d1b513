"""next_step: replica sets follow their policy one committed step at a time."""

from __future__ import annotations

from logbroker.queue_placement import AllReplicas, NodeReplicas, NodeView, ReplicaCount
from logbroker.replica_moves import ReplicaStep, next_step

UP3 = [NodeView("n1", True), NodeView("n2", True), NodeView("n3", True)]
UP4 = [*UP3, NodeView("n4", True)]


def test_a_nodes_policy_adds_then_moves_the_leader_then_drops() -> None:
    spec = NodeReplicas(("n2", "n3"))
    # 1. the wanted node that is missing joins
    step = next_step(spec, "n1", ("n1", "n2"), ("n1", "n2"), UP3, {})
    assert step == ReplicaStep("add", ("n1", "n2", "n3"))
    # 2. nothing until a wanted member is in sync... n2 is: the leader moves there
    step = next_step(spec, "n1", ("n1", "n2", "n3"), ("n1", "n2"), UP3, {})
    assert step == ReplicaStep("transfer", ("n1", "n2", "n3"), "n2")
    # 3. the old leader leaves once every wanted member is in sync (n3 is asked to sync)
    step = next_step(spec, "n2", ("n2", "n1", "n3"), ("n2", "n1"), UP3, {})
    assert step == ReplicaStep("sync", ("n2", "n1", "n3"))
    step = next_step(spec, "n2", ("n2", "n1", "n3"), ("n2", "n1", "n3"), UP3, {})
    assert step == ReplicaStep("drop", ("n2", "n3"))
    assert next_step(spec, "n2", ("n2", "n3"), ("n2", "n3"), UP3, {}) is None


def test_no_wanted_member_in_sync_means_asking_it_to_sync() -> None:
    spec = NodeReplicas(("n3",))
    assert next_step(spec, "n1", ("n1", "n3"), ("n1",), UP3, {}) == ReplicaStep(
        "sync", ("n1", "n3"))
    down = [NodeView("n1", True), NodeView("n3", False)]
    assert next_step(spec, "n1", ("n1", "n3"), ("n1",), down, {}) is None


def test_nodes_unknown_to_the_cluster_change_nothing() -> None:
    assert next_step(NodeReplicas(("x9",)), "n1", ("n1", "n2"), ("n1", "n2"), UP3, {}) is None


def test_all_adds_a_node_that_joined_and_skips_down_ones() -> None:
    step = next_step(AllReplicas(), "n1", ("n1", "n2", "n3"), ("n1", "n2", "n3"), UP4, {})
    assert step == ReplicaStep("add", ("n1", "n2", "n3", "n4"))
    down4 = [*UP3, NodeView("n4", False)]
    assert next_step(AllReplicas(), "n1", ("n1", "n2", "n3"), ("n1",), down4, {}) is None


def test_a_count_grows_onto_the_least_loaded_node_and_shrinks_out_of_sync_first() -> None:
    step = next_step(ReplicaCount(3), "n1", ("n1", "n2"), ("n1", "n2"), UP4, {"n3": 5, "n4": 1})
    assert step == ReplicaStep("add", ("n1", "n2", "n4"))
    step = next_step(ReplicaCount(2), "n1", ("n1", "n2", "n3"), ("n1", "n2", "n3"), UP3, {})
    assert step == ReplicaStep("drop", ("n1", "n2"))
    step = next_step(ReplicaCount(2), "n1", ("n1", "n2", "n3"), ("n1", "n3"), UP3, {})
    assert step == ReplicaStep("drop", ("n1", "n3"))
    assert next_step(ReplicaCount(1), "n1", ("n1",), ("n1",), UP3, {}) is None
