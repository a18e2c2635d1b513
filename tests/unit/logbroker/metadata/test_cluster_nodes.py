"""Cluster nodes, their liveness, and queue placement in the metadata state machine."""

from __future__ import annotations

import json
from typing import Any

import pytest

from logbroker.metadata import (
    AddClusterNode,
    AddVhost,
    Applied,
    ClusterNodeAdded,
    ClusterNodeRecord,
    ClusterNodeRemoved,
    ClusterNodeUpdated,
    DeclareQueue,
    DeleteQueue,
    DeleteVhost,
    MetadataError,
    MetadataState,
    NodeLivenessChanged,
    QueueDeclared,
    QueuePlacementChanged,
    QueueRecord,
    RemoveClusterNode,
    SetNodeLiveness,
    SetQueuePlacement,
)
from tests.unit.logbroker.metadata.helpers import new_state


@pytest.fixture
def state() -> MetadataState:
    state = new_state()
    for index, name in enumerate(("n2", "n3", "n1")):
        state.apply(AddClusterNode(name, f"host{name}", 25672, 5672 + index, 15672, 100))
    return state


def refused(state: MetadataState, command: Any) -> MetadataError:
    before = json.dumps(state.snapshot())
    with pytest.raises(MetadataError) as caught:
        state.check(command)
    with pytest.raises(MetadataError):
        state.apply(command)
    assert json.dumps(state.snapshot()) == before
    return caught.value


# -- nodes ------------------------------------------------------------------


def test_a_new_node_is_up_since_it_was_added() -> None:
    state = new_state()
    applied = state.apply(AddClusterNode("n1", "10.0.0.1", 25672, 5672, 15672, 1234))
    record = ClusterNodeRecord("n1", "10.0.0.1", 25672, 5672, 15672, True, 1234)
    assert applied == Applied((ClusterNodeAdded(record),))
    assert state.cluster_node("n1") == record
    assert state.cluster_node("n9") is None


def test_cluster_nodes_are_listed_by_name(state: MetadataState) -> None:
    assert [node.name for node in state.cluster_nodes()] == ["n1", "n2", "n3"]


def test_adding_a_known_node_again_changes_nothing(state: MetadataState) -> None:
    again = state.apply(AddClusterNode("n1", "hostn1", 25672, 5674, 15672, 999))
    assert again == Applied(())
    assert state.cluster_node("n1") == ClusterNodeRecord(
        "n1", "hostn1", 25672, 5674, 15672, True, 100
    )


def test_a_new_address_updates_the_node_and_keeps_its_liveness(state: MetadataState) -> None:
    state.apply(SetNodeLiveness("n1", False, 200))
    before = state.cluster_node("n1")
    applied = state.apply(AddClusterNode("n1", "elsewhere", 25000, 5000, 15000, 300))
    after = ClusterNodeRecord("n1", "elsewhere", 25000, 5000, 15000, False, 200)
    assert applied == Applied((ClusterNodeUpdated(after, before),))  # type: ignore[arg-type]
    assert state.cluster_node("n1") == after


@pytest.mark.parametrize(
    ("command", "text"),
    [
        (AddClusterNode("", "h", 1, 2, 3, 0), "a cluster node name must not be empty"),
        (AddClusterNode("n", "", 1, 2, 3, 0), "cluster node 'n' needs a host"),
        (AddClusterNode("n", "h", 0, 2, 3, 0),
         "cluster node cluster_port must be an integer in 1..65535, got 0"),
        (AddClusterNode("n", "h", 1, 65536, 3, 0),
         "cluster node amqp_port must be an integer in 0..65535, got 65536"),
        (AddClusterNode("n", "h", 1, 2, -1, 0),
         "cluster node http_port must be an integer in 0..65535, got -1"),
        (AddClusterNode("n", "h", 1, 2, 3, -5), "since_ms must be a non-negative integer, got -5"),
        (SetNodeLiveness("n1", False, -1), "since_ms must be a non-negative integer, got -1"),
    ],
)  # fmt: skip
def test_bad_node_values_are_refused(state: MetadataState, command: Any, text: str) -> None:
    error = refused(state, command)
    assert error.reply_code == 406
    assert error.text == text


def test_unknown_nodes_are_not_found(state: MetadataState) -> None:
    for command in (RemoveClusterNode("n9"), SetNodeLiveness("n9", False, 1)):
        error = refused(state, command)
        assert error.reply_text == "NOT_FOUND - no cluster node 'n9'"


def test_liveness_changes_once_and_records_since_when(state: MetadataState) -> None:
    applied = state.apply(SetNodeLiveness("n2", False, 500))
    down = ClusterNodeRecord("n2", "hostn2", 25672, 5672, 15672, False, 500)
    assert applied == Applied((NodeLivenessChanged(down),))
    assert state.apply(SetNodeLiveness("n2", False, 600)) == Applied(())
    assert state.cluster_node("n2") == down
    applied = state.apply(SetNodeLiveness("n2", True, 700))
    up = ClusterNodeRecord("n2", "hostn2", 25672, 5672, 15672, True, 700)
    assert applied == Applied((NodeLivenessChanged(up),))


def test_removing_a_node_keeps_the_queues_that_name_it(state: MetadataState) -> None:
    state.apply(AddVhost("v"))
    state.apply(DeclareQueue("/", "a", leader_node="n1", members=("n1", "n2")))
    state.apply(DeclareQueue("v", "b", leader_node="n2", members=("n2", "n1")))
    state.apply(DeclareQueue("/", "c", leader_node="n3", members=("n3",)))
    removed = state.cluster_node("n1")
    applied = state.apply(RemoveClusterNode("n1"))
    assert applied == Applied(
        (ClusterNodeRemoved(removed, (("/", "a"),), (("/", "a"), ("v", "b"))),)  # type: ignore[arg-type]
    )
    assert state.cluster_node("n1") is None
    queue = state.queue("/", "a")
    assert queue is not None
    assert (queue.leader_node, queue.members) == ("n1", ("n1", "n2"))
    # a node that is gone but still leads queues stays visible in the counts
    assert state.queue_leader_counts() == {"n1": 1, "n2": 1, "n3": 1}


# -- placement at declare ---------------------------------------------------


def test_a_new_queue_takes_the_declared_placement(state: MetadataState) -> None:
    applied = state.apply(DeclareQueue("/", "q", leader_node="n2", members=("n2", "n3")))
    record = QueueRecord("/", "q", False, None, False, {}, "n2", ("n2", "n3"),
                         epoch=1, in_sync=("n2", "n3"))
    assert applied == Applied((QueueDeclared(record),))
    assert state.queue("/", "q") == record


def test_a_queue_declared_without_placement_has_none(state: MetadataState) -> None:
    state.apply(DeclareQueue("/", "q"))
    queue = state.queue("/", "q")
    assert queue is not None
    assert (queue.leader_node, queue.members) == (None, ())


@pytest.mark.parametrize("placement", [("n3", ("n3",)), (None, ()), ("n1", ("n1", "n2", "n3"))])
def test_a_redeclare_neither_compares_nor_changes_the_placement(
    state: MetadataState, placement: tuple[str | None, tuple[str, ...]]
) -> None:
    state.apply(DeclareQueue("/", "q", durable=True, leader_node="n2", members=("n2", "n1")))
    leader, members = placement
    again = state.apply(DeclareQueue("/", "q", durable=True, leader_node=leader, members=members))
    assert again == Applied(())
    queue = state.queue("/", "q")
    assert queue is not None
    assert (queue.leader_node, queue.members) == ("n2", ("n2", "n1"))


def test_a_redeclare_is_still_checked_for_equivalence(state: MetadataState) -> None:
    state.apply(DeclareQueue("/", "q", durable=True, leader_node="n2", members=("n2",)))
    error = refused(state, DeclareQueue("/", "q", durable=False, leader_node="n2",
                                        members=("n2",)))  # fmt: skip
    assert error.reply_code == 406


@pytest.mark.parametrize(
    ("leader", "members", "text"),
    [
        (None, ("n1",), "queue members given without a leader node"),
        ("", ("",), "a queue's leader node name must not be empty"),
        ("n1", (), "queue members [] must start with the leader node 'n1'"),
        ("n1", ("n2", "n1"), "queue members ['n2', 'n1'] must start with the leader node 'n1'"),
        ("n1", ("n1", ""), "a queue member's node name must not be empty"),
        ("n1", ("n1", "n2", "n1"), "queue members ['n1', 'n2', 'n1'] name a node twice"),
    ],
)
def test_a_malformed_placement_is_refused(
    state: MetadataState, leader: str | None, members: tuple[str, ...], text: str
) -> None:
    error = refused(state, DeclareQueue("/", "q", leader_node=leader, members=members))
    assert (error.reply_code, error.text) == (406, text)
    if leader is not None:
        state.apply(DeclareQueue("/", "q", leader_node="n3", members=("n3",)))
        error = refused(state, SetQueuePlacement("/", "q", leader, members))
        assert (error.reply_code, error.text) == (406, text)


def test_placement_may_name_nodes_the_cluster_does_not_know(state: MetadataState) -> None:
    """Decided from the declaring node's view; a node may leave before the entry commits."""
    state.apply(DeclareQueue("/", "q", leader_node="gone", members=("gone", "n1")))
    assert state.queue_leader_counts()["gone"] == 1


# -- moving a queue ---------------------------------------------------------


def test_set_queue_placement_moves_the_queue(state: MetadataState) -> None:
    state.apply(DeclareQueue("/", "q", durable=True, arguments={"x-max-length": 3},
                             leader_node="n1", members=("n1", "n2")))  # fmt: skip
    applied = state.apply(SetQueuePlacement("/", "q", "n2", ("n2", "n3")))
    # a new leader starts epoch 2; n3 is new, so not in sync yet
    moved = QueueRecord("/", "q", True, None, False, {"x-max-length": 3}, "n2", ("n2", "n3"),
                        epoch=2, in_sync=("n2",))
    assert applied == Applied((QueuePlacementChanged(moved, "n1", ("n1", "n2")),))
    assert state.queue("/", "q") == moved
    assert state.apply(SetQueuePlacement("/", "q", "n2", ("n2", "n3"))) == Applied(())


def test_set_queue_placement_needs_the_queue(state: MetadataState) -> None:
    error = refused(state, SetQueuePlacement("/", "nope", "n1", ("n1",)))
    assert error.reply_text == "NOT_FOUND - no queue 'nope' in vhost '/'"
    error = refused(state, SetQueuePlacement("v9", "q", "n1", ("n1",)))
    assert error.reply_text == "NOT_FOUND - no vhost 'v9'"


def test_set_queue_placement_places_a_queue_declared_without_one(state: MetadataState) -> None:
    state.apply(DeclareQueue("/", "q"))
    applied = state.apply(SetQueuePlacement("/", "q", "n3", ("n3",)))
    assert applied.events[0] == QueuePlacementChanged(
        QueueRecord("/", "q", False, None, False, {}, "n3", ("n3",), epoch=1, in_sync=("n3",)),
        None, ()
    )


# -- counts -----------------------------------------------------------------


def test_leader_and_member_counts_cover_every_vhost_and_every_node(
    state: MetadataState,
) -> None:
    assert state.queue_leader_counts() == {"n1": 0, "n2": 0, "n3": 0}
    state.apply(AddVhost("v"))
    state.apply(DeclareQueue("/", "a", leader_node="n1", members=("n1", "n2", "n3")))
    state.apply(DeclareQueue("/", "b", leader_node="n1", members=("n1", "n2")))
    state.apply(DeclareQueue("v", "c", leader_node="n2", members=("n2",)))
    state.apply(DeclareQueue("v", "d"))  # no placement: counted nowhere
    assert state.queue_leader_counts() == {"n1": 2, "n2": 1, "n3": 0}
    assert state.queue_member_counts() == {"n1": 2, "n2": 3, "n3": 1}
    assert list(state.queue_leader_counts()) == ["n1", "n2", "n3"]
    state.apply(DeleteQueue("/", "a"))
    state.apply(SetQueuePlacement("/", "b", "n3", ("n3",)))
    assert state.queue_leader_counts() == {"n1": 0, "n2": 1, "n3": 1}
    assert state.queue_member_counts() == {"n1": 0, "n2": 1, "n3": 1}
    state.apply(DeleteVhost("v"))
    assert state.queue_leader_counts() == {"n1": 0, "n2": 0, "n3": 1}


# -- snapshots --------------------------------------------------------------


def test_snapshots_keep_nodes_and_placement(state: MetadataState) -> None:
    state.apply(SetNodeLiveness("n3", False, 42))
    state.apply(DeclareQueue("/", "q", leader_node="n2", members=("n2", "n1")))
    document = json.loads(json.dumps(state.snapshot()))
    restored = MetadataState.from_snapshot(document)
    assert restored.snapshot() == state.snapshot()
    assert restored.cluster_nodes() == state.cluster_nodes()
    assert restored.cluster_node("n3") == ClusterNodeRecord(
        "n3", "hostn3", 25672, 5673, 15672, False, 42
    )
    assert restored.queue("/", "q") == state.queue("/", "q")


def test_a_snapshot_from_before_clustering_still_loads(state: MetadataState) -> None:
    state.apply(DeclareQueue("/", "q", durable=True, arguments={"x-max-length": 1}))
    document = json.loads(json.dumps(state.snapshot()))
    del document["cluster_nodes"]
    for vhost in document["vhosts"]:
        for queue in vhost["queues"]:
            del queue["leader_node"]
            del queue["members"]
    restored = MetadataState.from_snapshot(document)
    assert restored.cluster_nodes() == ()
    queue = restored.queue("/", "q")
    assert queue == QueueRecord("/", "q", True, None, False, {"x-max-length": 1})
    assert (queue.leader_node, queue.members) == (None, ())


def test_a_nodes_host_and_zone_are_recorded_kept_by_a_bare_update_and_checked(
        state: MetadataState) -> None:
    state.apply(AddClusterNode("w2", "127.0.0.1", 25673, 5672, 15672, 200, "hA", "z1"))
    assert (state.cluster_node("w2").host_id, state.cluster_node("w2").zone) == ("hA", "z1")
    # A join knows only the address: the labels stay.
    applied = state.apply(AddClusterNode("w2", "127.0.0.2", 25673, 5672, 15672, 300))
    record = state.cluster_node("w2")
    assert (record.host, record.host_id, record.zone) == ("127.0.0.2", "hA", "z1")
    assert applied.events == (ClusterNodeUpdated(record, ClusterNodeRecord(
        "w2", "127.0.0.1", 25673, 5672, 15672, True, 200, "hA", "z1")),)
    state.apply(AddClusterNode("w2", "127.0.0.2", 25673, 5672, 15672, 300, "hB"))
    assert (state.cluster_node("w2").host_id, state.cluster_node("w2").zone) == ("hB", "z1")
    error = refused(state, AddClusterNode("w3", "h", 25674, 5672, 15672, 0, "x" * 256))
    assert error.reply_code == 406 and "host_id" in str(error)
    error = refused(state, AddClusterNode("w3", "h", 25674, 5672, 15672, 0, "", "z" * 256))
    assert "zone" in str(error)
    restored = MetadataState.from_snapshot(json.loads(json.dumps(state.snapshot())))
    assert restored.cluster_node("w2") == state.cluster_node("w2")
    old = ClusterNodeRecord.from_json({"name": "o", "host": "h", "cluster_port": 1,
                                       "amqp_port": 0, "http_port": 0, "up": True,
                                       "since_ms": 0})
    assert (old.host_id, old.zone) == ("", "")
