"""Properties of the state machine: refusals change nothing, replay and snapshots are exact."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.metadata import Command, MetadataError, MetadataState
from tests.unit.logbroker.metadata.command_strategies import commands, sequences
from tests.unit.logbroker.metadata.helpers import new_state


def run(state: MetadataState, sequence: list[Command]) -> list[Command]:
    """Apply `sequence`; check the refusal properties; return the commands that applied."""
    applied: list[Command] = []
    for command in sequence:
        before = json.dumps(state.snapshot())
        try:
            state.check(command)
        except MetadataError as checked:
            with pytest.raises(MetadataError) as caught:
                state.apply(command)
            assert caught.value.reply_text == checked.reply_text
            assert json.dumps(state.snapshot()) == before
            continue
        state.apply(command)
        applied.append(command)
    return applied


@settings(max_examples=200)
@given(sequences)
def test_refusals_leave_the_state_unchanged_and_replay_is_exact(sequence: list[Command]) -> None:
    state = new_state()
    applied = run(state, sequence)
    replayed = new_state()
    for command in applied:
        replayed.apply(command)
    assert replayed.snapshot() == state.snapshot()


@settings(max_examples=100)
@given(sequences, st.lists(commands, max_size=30))
def test_a_restored_snapshot_behaves_like_the_original(
    first: list[Command], second: list[Command]
) -> None:
    state = new_state()
    run(state, first)
    document = json.loads(json.dumps(state.snapshot()))  # really JSON-safe
    restored = MetadataState.from_snapshot(document)
    assert restored.snapshot() == state.snapshot()
    for command in second:
        outcomes = []
        for machine in (state, restored):
            try:
                outcomes.append(machine.apply(command))
            except MetadataError as error:
                outcomes.append(error.reply_text)  # type: ignore[arg-type]
        assert outcomes[0] == outcomes[1]
    assert restored.snapshot() == state.snapshot()
