"""Runtime parameters and the vhost limits they carry (RabbitMQ's vhost-limits component)."""

import pytest

from logbroker.metadata import (
    ClearParameter,
    DeclareQueue,
    MetadataError,
    MetadataState,
    ParameterChanged,
    SetParameter,
)


def state_with(*commands: object) -> MetadataState:
    state = MetadataState.bootstrap("hash")
    for command in commands:
        state.apply(command)  # type: ignore[arg-type]
    return state


def limits(**values: int) -> SetParameter:
    return SetParameter.of("/", "vhost-limits", "limits",
                           {key.replace("_", "-"): value for key, value in values.items()})


def test_set_change_and_clear_emit_parameter_changed_once() -> None:
    state = state_with()
    applied = state.apply(limits(max_queues=2))
    assert applied.events == (ParameterChanged("/", "vhost-limits", "limits", False),)
    assert state.apply(limits(max_queues=2)).events == ()
    assert state.vhost_limit("/", "max-queues") == 2
    assert state.vhost_limit("/", "max-connections") is None
    applied = state.apply(ClearParameter("/", "vhost-limits", "limits"))
    assert applied.events == (ParameterChanged("/", "vhost-limits", "limits", True),)
    assert state.parameters("/") == ()


def test_max_queues_refuses_the_next_queue_with_rabbitmqs_text() -> None:
    state = state_with(limits(max_queues=1), DeclareQueue("/", "q1"))
    state.apply(DeclareQueue("/", "q1"))  # redeclaring an existing queue is no new queue
    with pytest.raises(MetadataError) as refused:
        state.apply(DeclareQueue("/", "q2"))
    assert refused.value.reply_text == ("PRECONDITION_FAILED - cannot declare queue 'q2': "
                                        "queue limit in vhost '/' (1) is reached")
    state.apply(DeclareQueue("/", "amq.staging.ab.1", server_named=True))  # plumbing
    state.apply(limits(max_queues=-1))  # negative: no limit
    state.apply(DeclareQueue("/", "q2"))


def test_zero_allows_nothing() -> None:
    state = state_with(limits(max_queues=0, max_connections=0))
    assert state.vhost_limit("/", "max-connections") == 0
    with pytest.raises(MetadataError):
        state.apply(DeclareQueue("/", "q"))


@pytest.mark.parametrize(("command", "code"), [
    (SetParameter.of("/", "no-such-component", "x", {}), 404),
    (SetParameter.of("/", "vhost-limits", "other", {}), 406),
    (SetParameter.of("/", "vhost-limits", "limits", {"max-channels": 1}), 406),
    (SetParameter.of("/", "vhost-limits", "limits", {"max-queues": "10"}), 406),
    (SetParameter.of("/", "vhost-limits", "limits", {"max-queues": True}), 406),
    (SetParameter.of("nowhere", "vhost-limits", "limits", {}), 404),
    (ClearParameter("/", "vhost-limits", "limits"), 404),
])
def test_bad_parameters_are_refused_and_change_nothing(command: object, code: int) -> None:
    state = state_with()
    with pytest.raises(MetadataError) as refused:
        state.apply(command)  # type: ignore[arg-type]
    assert refused.value.reply_code == code
    assert state.parameters("/") == ()


def test_parameters_survive_a_snapshot() -> None:
    state = state_with(limits(max_connections=5))
    restored = MetadataState.from_snapshot(state.snapshot())
    assert restored.parameters("/") == state.parameters("/")
    assert restored.vhost_limit("/", "max-connections") == 5
