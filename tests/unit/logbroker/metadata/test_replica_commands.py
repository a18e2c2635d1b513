"""A replicated queue's epoch and in-sync set in the metadata state machine."""

from __future__ import annotations

import json

import pytest

from logbroker.metadata import (
    Applied,
    DeclareQueue,
    ElectQueueLeader,
    MetadataError,
    MetadataState,
    QueueInSyncChanged,
    QueuePlacementChanged,
    QueueRecord,
    SetQueueInSync,
)
from tests.unit.logbroker.metadata.helpers import new_state

MEMBERS = ("n1", "n2", "n3")


@pytest.fixture
def state() -> MetadataState:
    state = new_state()
    state.apply(DeclareQueue("/", "q", durable=True, leader_node="n1", members=MEMBERS))
    return state


def queue(state: MetadataState) -> QueueRecord:
    record = state.queue("/", "q")
    assert record is not None
    return record


def refused(state: MetadataState, command: object) -> MetadataError:
    with pytest.raises(MetadataError) as caught:
        state.apply(command)  # type: ignore[arg-type]
    return caught.value


def test_a_declared_replicated_queue_starts_at_epoch_1_with_every_member_in_sync(
    state: MetadataState,
) -> None:
    record = queue(state)
    assert (record.epoch, record.in_sync, record.replicated) == (1, MEMBERS, True)
    state.apply(DeclareQueue("/", "plain"))
    plain = state.queue("/", "plain")
    assert plain is not None and (plain.epoch, plain.in_sync, plain.replicated) == (0, (), False)


def test_the_leader_shrinks_and_grows_the_in_sync_set(state: MetadataState) -> None:
    applied = state.apply(SetQueueInSync("/", "q", 1, ("n1", "n3")))
    assert applied == Applied((QueueInSyncChanged(queue(state)),))
    assert queue(state).in_sync == ("n1", "n3")
    assert state.apply(SetQueueInSync("/", "q", 1, ("n1", "n3"))) == Applied(())
    state.apply(SetQueueInSync("/", "q", 1, MEMBERS))
    assert queue(state).in_sync == MEMBERS


@pytest.mark.parametrize(("in_sync", "text"), [
    ((), "must start with the leader node 'n1'"),
    (("n2", "n1"), "must start with the leader node 'n1'"),
    (("n1", "n1"), "name a node twice"),
    (("n1", "n9"), "['n9'] are not members"),
])  # fmt: skip
def test_an_in_sync_set_is_checked(state: MetadataState, in_sync: tuple[str, ...],
                                   text: str) -> None:
    error = refused(state, SetQueueInSync("/", "q", 1, in_sync))
    assert error.reply_code == 406 and text in error.reply_text


def test_a_stale_epoch_cannot_change_the_in_sync_set(state: MetadataState) -> None:
    state.apply(ElectQueueLeader("/", "q", 1, "n2", ("n2", "n3")))
    error = refused(state, SetQueueInSync("/", "q", 1, ("n1",)))
    assert error.reply_code == 406
    assert "at epoch 2, not 1: its leader changed" in error.reply_text
    assert queue(state).in_sync == ("n2", "n3")


def test_an_election_starts_the_next_epoch_with_the_new_leader_first(
    state: MetadataState,
) -> None:
    before = queue(state)
    applied = state.apply(ElectQueueLeader("/", "q", 1, "n3", ("n3", "n2")))
    after = queue(state)
    assert (after.leader_node, after.members, after.epoch, after.in_sync) == (
        "n3", ("n3", "n1", "n2"), 2, ("n3", "n2"))
    assert applied == Applied((QueuePlacementChanged(after, "n1", before.members),))


def test_a_second_election_for_the_same_epoch_changes_nothing(state: MetadataState) -> None:
    state.apply(ElectQueueLeader("/", "q", 1, "n2", ("n2",)))
    assert state.apply(ElectQueueLeader("/", "q", 1, "n3", ("n3",))) == Applied(())
    assert (queue(state).leader_node, queue(state).epoch) == ("n2", 2)


def test_only_a_member_can_be_elected(state: MetadataState) -> None:
    error = refused(state, ElectQueueLeader("/", "q", 1, "n9", ("n9",)))
    assert error.reply_code == 406 and "'n9' is not a member" in error.reply_text
    error = refused(state, ElectQueueLeader("/", "q", 1, "n2", ("n1",)))
    assert "must start with the leader node 'n2'" in error.reply_text


def test_unknown_queues_are_404(state: MetadataState) -> None:
    assert refused(state, SetQueueInSync("/", "nope", 1, ("n1",))).reply_code == 404
    assert refused(state, ElectQueueLeader("/", "nope", 1, "n1", ("n1",))).reply_code == 404


def test_epoch_and_in_sync_survive_a_snapshot(state: MetadataState) -> None:
    state.apply(ElectQueueLeader("/", "q", 1, "n2", ("n2", "n3")))
    restored = MetadataState.from_snapshot(json.loads(json.dumps(state.snapshot())))
    assert restored.queue("/", "q") == queue(state)


def test_records_from_before_replication_decode_with_defaults() -> None:
    old = {"name": "q", "durable": True, "exclusive_owner": None, "auto_delete": False,
           "arguments": {}, "leader_node": "n1", "members": ["n1"]}
    record = QueueRecord.from_json("/", old)
    assert (record.epoch, record.in_sync) == (0, ())


def test_an_election_decided_from_an_older_in_sync_set_changes_nothing(
    state: MetadataState,
) -> None:
    # the controller decided for n2; meanwhile the leader shrank the set to itself
    state.apply(SetQueueInSync("/", "q", 1, ("n1",)))
    assert state.apply(ElectQueueLeader("/", "q", 1, "n2", ("n2", "n3"))) == Applied(())
    assert (queue(state).leader_node, queue(state).epoch) == ("n1", 1)
    # only ha-promote-on-failure: always elects outside the set
    state.apply(ElectQueueLeader("/", "q", 1, "n2", ("n2",), out_of_sync=True))
    assert (queue(state).leader_node, queue(state).epoch, queue(state).in_sync) == (
        "n2", 2, ("n2",))


def test_an_election_keeps_only_members_still_in_sync(state: MetadataState) -> None:
    state.apply(SetQueueInSync("/", "q", 1, ("n1", "n2")))
    state.apply(ElectQueueLeader("/", "q", 1, "n2", ("n2", "n3")))  # n3 left meanwhile
    assert queue(state).in_sync == ("n2",)
