"""Consumer groups in the metadata: commit, merge, reset, bounds, cascades, snapshots."""

from __future__ import annotations

import json

import pytest

from logbroker.metadata import (
    AddVhost,
    CommitGroupOffsets,
    ConsumerGroupDeleted,
    DeclareQueue,
    DeleteConsumerGroup,
    DeleteQueue,
    DeleteVhost,
    GroupOffsetsCommitted,
    MetadataError,
    MetadataState,
    decode_command,
    encode_command,
    group_commands,
)
from logbroker.metadata.reply_codes import NOT_FOUND, PRECONDITION_FAILED
from tests.unit.logbroker.metadata.helpers import new_state


def _state(*queues: str) -> MetadataState:
    state = new_state()
    for name in queues:
        state.apply(DeclareQueue("/", name))
    return state


def _offsets(state: MetadataState, group: str, vhost: str = "/") -> dict[str, int]:
    record = state.consumer_group(vhost, group)
    assert record is not None
    return dict(record.offsets)


def test_a_commit_creates_the_group_and_merges_later_commits() -> None:
    state = _state("q1", "q2")
    applied = state.apply(CommitGroupOffsets("/", "spark", {"q1": 10}))
    assert applied.events == (GroupOffsetsCommitted("/", "spark", (("q1", 10),)),)
    state.apply(CommitGroupOffsets("/", "spark", {"q2": 5}))
    assert _offsets(state, "spark") == {"q1": 10, "q2": 5}
    state.apply(CommitGroupOffsets("/", "spark", {"q1": 12}))
    assert _offsets(state, "spark") == {"q1": 12, "q2": 5}
    assert [group.name for group in state.consumer_groups("/")] == ["spark"]


def test_a_lower_offset_is_a_reset_and_the_same_offsets_change_nothing() -> None:
    state = _state("q1")
    state.apply(CommitGroupOffsets("/", "g", {"q1": 10}))
    assert state.apply(CommitGroupOffsets("/", "g", {"q1": 3})).changed
    assert _offsets(state, "g") == {"q1": 3}
    assert not state.apply(CommitGroupOffsets("/", "g", {"q1": 3})).changed


def test_an_empty_commit_creates_an_empty_group() -> None:
    state = _state()
    state.apply(CommitGroupOffsets("/", "g", {}))
    assert _offsets(state, "g") == {}


@pytest.mark.parametrize(("command", "code"), [
    (CommitGroupOffsets("/", "g", {"nope": 1}), NOT_FOUND),
    (CommitGroupOffsets("nope", "g", {}), NOT_FOUND),
    (CommitGroupOffsets("/", "g", {"q1": -1}), PRECONDITION_FAILED),
    (CommitGroupOffsets("/", "g", {"q1": 2**63}), PRECONDITION_FAILED),
    (CommitGroupOffsets("/", "g", {"q1": True}), PRECONDITION_FAILED),
    (CommitGroupOffsets("/", "g", {"q1": "10"}), PRECONDITION_FAILED),  # type: ignore[dict-item]
    (CommitGroupOffsets("/", "g", {"q1": 1.5}), PRECONDITION_FAILED),  # type: ignore[dict-item]
    (CommitGroupOffsets("/", "", {"q1": 1}), PRECONDITION_FAILED),
    (CommitGroupOffsets("/", "é" * 128, {"q1": 1}), PRECONDITION_FAILED),  # 256 bytes
    (CommitGroupOffsets("/", "\ud800", {"q1": 1}), PRECONDITION_FAILED),
    (DeleteConsumerGroup("nope", "g"), NOT_FOUND),
])  # fmt: skip
def test_refusals_change_nothing(command: CommitGroupOffsets | DeleteConsumerGroup,
                                 code: int) -> None:
    state = _state("q1")
    state.apply(CommitGroupOffsets("/", "g", {"q1": 4}))
    before = json.dumps(state.snapshot())
    with pytest.raises(MetadataError) as raised:
        state.apply(command)
    assert raised.value.reply_code == code
    assert json.dumps(state.snapshot()) == before


def test_a_name_of_255_bytes_is_fine() -> None:
    state = _state("q1")
    state.apply(CommitGroupOffsets("/", "é" * 127 + "x", {"q1": 1}))


def test_deleting_a_group_is_idempotent() -> None:
    state = _state("q1")
    state.apply(CommitGroupOffsets("/", "g", {"q1": 1}))
    assert state.apply(DeleteConsumerGroup("/", "g")).events == (ConsumerGroupDeleted("/", "g"),)
    assert state.consumer_group("/", "g") is None
    assert not state.apply(DeleteConsumerGroup("/", "g")).changed


def test_deleting_a_queue_drops_it_from_every_group_of_its_vhost() -> None:
    state = _state("q1", "q2")
    state.apply(AddVhost("v"))
    state.apply(DeclareQueue("v", "q1"))
    state.apply(CommitGroupOffsets("/", "a", {"q1": 1, "q2": 2}))
    state.apply(CommitGroupOffsets("/", "b", {"q1": 3}))
    state.apply(CommitGroupOffsets("v", "a", {"q1": 4}))
    state.apply(DeleteQueue("/", "q1"))
    assert _offsets(state, "a") == {"q2": 2}
    assert _offsets(state, "b") == {}  # the group stays, empty, until deleted
    assert _offsets(state, "a", "v") == {"q1": 4}
    # A queue declared again under the same name starts with no committed offset.
    state.apply(DeclareQueue("/", "q1"))
    assert "q1" not in _offsets(state, "a")


def test_deleting_a_vhost_drops_its_groups() -> None:
    state = _state()
    state.apply(AddVhost("v"))
    state.apply(DeclareQueue("v", "q"))
    state.apply(CommitGroupOffsets("v", "g", {"q": 1}))
    state.apply(DeleteVhost("v"))
    state.apply(AddVhost("v"))
    assert state.consumer_groups("v") == ()


def test_bounds_on_groups_per_vhost_and_queues_per_group(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(group_commands, "MAX_GROUPS_PER_VHOST", 2)
    monkeypatch.setattr(group_commands, "MAX_QUEUES_PER_GROUP", 2)
    state = _state("q1", "q2", "q3")
    state.apply(CommitGroupOffsets("/", "a", {"q1": 1, "q2": 1}))
    state.apply(CommitGroupOffsets("/", "b", {}))
    with pytest.raises(MetadataError, match="3 queues; the limit is 2") as raised:
        state.apply(CommitGroupOffsets("/", "a", {"q3": 1}))
    assert raised.value.reply_code == PRECONDITION_FAILED
    state.apply(CommitGroupOffsets("/", "a", {"q1": 5, "q2": 6}))  # existing entries: fine
    with pytest.raises(MetadataError, match="2 consumer groups") as raised:
        state.apply(CommitGroupOffsets("/", "c", {}))
    assert raised.value.reply_code == PRECONDITION_FAILED
    state.apply(CommitGroupOffsets("/", "b", {"q1": 1}))  # an existing group: fine


def test_the_default_bounds() -> None:
    assert group_commands.MAX_GROUPS_PER_VHOST == 1_000
    assert group_commands.MAX_QUEUES_PER_GROUP == 10_000


def test_snapshot_round_trip_keeps_groups_in_order() -> None:
    state = _state("q1", "q2")
    state.apply(CommitGroupOffsets("/", "b", {"q2": 7, "q1": 1}))
    state.apply(CommitGroupOffsets("/", "a", {"q1": 2}))
    document = json.loads(json.dumps(state.snapshot()))
    restored = MetadataState.from_snapshot(document)
    assert restored.snapshot() == state.snapshot()
    assert [g.name for g in restored.consumer_groups("/")] == ["b", "a"]
    assert list(_offsets(restored, "b").items()) == [("q2", 7), ("q1", 1)]


def test_a_snapshot_written_before_groups_still_loads() -> None:
    state = _state("q1")
    document = json.loads(json.dumps(state.snapshot()))
    for vhost in document["vhosts"]:
        del vhost["groups"]
    restored = MetadataState.from_snapshot(document)
    assert restored.consumer_groups("/") == ()
    restored.apply(CommitGroupOffsets("/", "g", {"q1": 1}))


def test_commands_round_trip_through_their_encoding() -> None:
    for command in (CommitGroupOffsets("/", "g", {"q1": 10, "q2": 0}),
                    DeleteConsumerGroup("/", "g")):
        decoded = decode_command(encode_command(command))
        assert decoded == command
    decoded = decode_command(encode_command(CommitGroupOffsets("/", "g", {"q": 2**62})))
    assert isinstance(decoded, CommitGroupOffsets)
    assert type(decoded.offsets["q"]) is int
