"""Declares and redeclares: RabbitMQ's equivalence rules, reserved names, exclusivity."""

from __future__ import annotations

from typing import Any

import pytest

from logbroker.metadata import (
    Applied,
    DeclareExchange,
    DeclareQueue,
    DeleteExchange,
    DeleteQueue,
    ExchangeDeclared,
    MetadataError,
    MetadataState,
    QueueDeclared,
)
from tests.unit.logbroker.metadata.helpers import new_state


@pytest.fixture
def state() -> MetadataState:
    return new_state()


def refused(state: MetadataState, command: Any) -> MetadataError:
    with pytest.raises(MetadataError) as caught:
        state.apply(command)
    return caught.value


# -- queues -----------------------------------------------------------------


def test_declare_new_queue_then_equivalent_redeclare_changes_nothing(state: MetadataState) -> None:
    first = state.apply(DeclareQueue("/", "q", durable=True, arguments={"x-max-length": 5}))
    assert isinstance(first.events[0], QueueDeclared)
    again = state.apply(DeclareQueue("/", "q", durable=True, arguments={"x-max-length": 5}))
    assert again == Applied(())
    assert not again.changed


@pytest.mark.parametrize(
    ("first", "second", "text"),
    [
        ({"durable": False}, {"durable": True},
         "inequivalent arg 'durable' for queue 'q' in vhost '/': received 'true' but current "
         "is 'false'"),
        ({"auto_delete": True}, {"auto_delete": False},
         "inequivalent arg 'auto_delete' for queue 'q' in vhost '/': received 'false' but "
         "current is 'true'"),
        ({"arguments": {"x-max-length": 10}}, {"arguments": {"x-max-length": 20}},
         "inequivalent arg 'x-max-length' for queue 'q' in vhost '/': received '20' but "
         "current is '10'"),
        ({}, {"arguments": {"x-max-priority": 10}},
         "inequivalent arg 'x-max-priority' for queue 'q' in vhost '/': received the value "
         "'10' of type 'signedint' but current is none"),
        ({"arguments": {"x-max-length-bytes": 2**40}}, {},
         "inequivalent arg 'x-max-length-bytes' for queue 'q' in vhost '/': received none but "
         "current is the value '1099511627776' of type 'long'"),
        ({"arguments": {"x-dead-letter-exchange": "a"}},
         {"arguments": {"x-dead-letter-exchange": "b"}},
         "inequivalent arg 'x-dead-letter-exchange' for queue 'q' in vhost '/': received 'b' "
         "but current is 'a'"),
        ({"arguments": {"x-single-active-consumer": True}},
         {"arguments": {"x-single-active-consumer": 1}},
         "inequivalent arg 'x-single-active-consumer' for queue 'q' in vhost '/': received "
         "'1' but current is 'true'"),
        ({"arguments": {"x-queue-type": "quorum"}}, {},
         "inequivalent arg 'x-queue-type' for queue 'q' in vhost '/': received none but "
         "current is the value 'quorum' of type 'longstr'"),
    ],
)  # fmt: skip
def test_inequivalent_queue_redeclare_is_406_in_rabbitmq_wording(
    state: MetadataState, first: dict[str, Any], second: dict[str, Any], text: str
) -> None:
    state.apply(DeclareQueue("/", "q", **first))
    before = state.snapshot()
    error = refused(state, DeclareQueue("/", "q", **second))
    assert error.reply_code == 406
    assert error.reply_text == f"PRECONDITION_FAILED - {text}"
    assert state.snapshot() == before


def test_integer_and_string_of_same_digits_are_not_equivalent(state: MetadataState) -> None:
    state.apply(DeclareQueue("/", "q", arguments={"x-max-length": 10}))
    error = refused(state, DeclareQueue("/", "q", arguments={"x-max-length": "10"}))
    assert error.reply_code == 406


def test_missing_queue_type_equals_classic(state: MetadataState) -> None:
    state.apply(DeclareQueue("/", "q"))
    assert state.apply(DeclareQueue("/", "q", arguments={"x-queue-type": "classic"})) == Applied()
    state.apply(DeclareQueue("/", "r", arguments={"x-queue-type": "classic"}))
    assert state.apply(DeclareQueue("/", "r")) == Applied()


def test_arguments_rabbitmq_does_not_compare_are_ignored(state: MetadataState) -> None:
    state.apply(DeclareQueue("/", "q", arguments={"x-custom": 1}))
    assert state.apply(DeclareQueue("/", "q", arguments={"x-custom": 2})) == Applied()


def test_exclusive_queue_is_never_durable(state: MetadataState) -> None:
    state.apply(DeclareQueue("/", "q", durable=True, exclusive_owner="c1"))
    queue = state.queue("/", "q")
    assert queue is not None and not queue.durable and queue.exclusive
    assert state.apply(DeclareQueue("/", "q", durable=True, exclusive_owner="c1")) == Applied()


@pytest.mark.parametrize(
    ("owner", "redeclarer"), [("c1", "c2"), ("c1", None), (None, "c2")]
)
def test_exclusivity_mismatch_is_405_resource_locked(
    state: MetadataState, owner: str | None, redeclarer: str | None
) -> None:
    state.apply(DeclareQueue("/", "q", exclusive_owner=owner))
    error = refused(state, DeclareQueue("/", "q", exclusive_owner=redeclarer))
    assert error.reply_code == 405
    assert error.reply_text.startswith(
        "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'q' in vhost '/'"
    )


def test_check_queue_access(state: MetadataState) -> None:
    state.apply(DeclareQueue("/", "mine", exclusive_owner="c1"))
    state.apply(DeclareQueue("/", "shared"))
    assert state.check_queue_access("/", "mine", "c1").name == "mine"
    assert state.check_queue_access("/", "shared", "c2").name == "shared"
    assert state.check_queue_access("/", "shared", None).name == "shared"
    with pytest.raises(MetadataError) as locked:
        state.check_queue_access("/", "mine", "c2")
    assert locked.value.reply_code == 405
    with pytest.raises(MetadataError) as missing:
        state.check_queue_access("/", "nope", "c1")
    assert missing.value.reply_text == "NOT_FOUND - no queue 'nope' in vhost '/'"
    assert [queue.name for queue in state.exclusive_queues_of("c1")] == ["mine"]


def test_reserved_queue_names_are_403_unless_server_named(state: MetadataState) -> None:
    error = refused(state, DeclareQueue("/", "amq.x"))
    assert error.reply_code == 403
    assert error.reply_text == (
        "ACCESS_REFUSED - queue name 'amq.x' contains reserved prefix 'amq.*'"
    )
    state.apply(DeclareQueue("/", "amq.gen-abc", exclusive_owner="c1", server_named=True))
    assert state.queue("/", "amq.gen-abc") is not None


@pytest.mark.parametrize(
    ("arguments", "text"),
    [
        ({"x-max-length": -1},
         "invalid arg 'x-max-length' for queue 'q' in vhost '/': {value_negative,-1}"),
        ({"x-message-ttl": "soon"},
         "invalid arg 'x-message-ttl' for queue 'q' in vhost '/': {unacceptable_type,longstr}"),
        ({"x-expires": 0}, "invalid arg 'x-expires' for queue 'q' in vhost '/': {value_zero,0}"),
        ({"x-max-priority": 256},
         "invalid arg 'x-max-priority' for queue 'q' in vhost '/': {max_value_exceeded,256}"),
        ({"x-overflow": "explode"},
         "invalid arg 'x-overflow' for queue 'q' in vhost '/': invalid_overflow"),
        ({"x-dead-letter-routing-key": "k"},
         "invalid arg 'x-dead-letter-routing-key' for queue 'q' in vhost '/': "
         "routing_key_but_no_dlx_defined"),
        ({"x-dead-letter-exchange": 5},
         "invalid type 'signedint' for arg 'x-dead-letter-exchange' in queue 'q' in vhost '/'"),
        ({"x-single-active-consumer": "yes"},
         "invalid arg 'x-single-active-consumer' for queue 'q' in vhost '/': "
         "{unacceptable_type,longstr}"),
        ({"x-queue-type": "mystery"},
         "invalid arg 'x-queue-type' for queue 'q' in vhost '/': "
         "\"unsupported queue type 'mystery'\""),
    ],
)  # fmt: skip
def test_new_queue_arguments_are_validated(
    state: MetadataState, arguments: dict[str, Any], text: str
) -> None:
    error = refused(state, DeclareQueue("/", "q", arguments=arguments))
    assert error.reply_text == f"PRECONDITION_FAILED - {text}"
    assert state.queue("/", "q") is None


def test_queue_in_missing_vhost_is_404(state: MetadataState) -> None:
    assert refused(state, DeclareQueue("nope", "q")).reply_text == "NOT_FOUND - no vhost 'nope'"


def test_deleting_a_missing_queue_is_a_no_op(state: MetadataState) -> None:
    assert state.apply(DeleteQueue("/", "nope")) == Applied()


# -- exchanges --------------------------------------------------------------


def test_declare_exchange_then_equivalent_redeclare(state: MetadataState) -> None:
    first = state.apply(DeclareExchange("/", "x", "topic", durable=True))
    assert isinstance(first.events[0], ExchangeDeclared)
    assert state.apply(DeclareExchange("/", "x", "topic", durable=True)) == Applied()


@pytest.mark.parametrize(
    ("second", "text"),
    [
        ({"type": "fanout"},
         "inequivalent arg 'type' for exchange 'x' in vhost '/': received 'fanout' but "
         "current is 'direct'"),
        ({"durable": False},
         "inequivalent arg 'durable' for exchange 'x' in vhost '/': received 'false' but "
         "current is 'true'"),
        ({"auto_delete": True},
         "inequivalent arg 'auto_delete' for exchange 'x' in vhost '/': received 'true' but "
         "current is 'false'"),
        ({"internal": True},
         "inequivalent arg 'internal' for exchange 'x' in vhost '/': received 'true' but "
         "current is 'false'"),
        ({"arguments": {"alternate-exchange": "other"}},
         "inequivalent arg 'alternate-exchange' for exchange 'x' in vhost '/': received "
         "'other' but current is 'ae'"),
    ],
)  # fmt: skip
def test_inequivalent_exchange_redeclare_is_406(
    state: MetadataState, second: dict[str, Any], text: str
) -> None:
    state.apply(DeclareExchange("/", "x", "direct", durable=True,
                                arguments={"alternate-exchange": "ae"}))  # fmt: skip
    fields: dict[str, Any] = {
        "type": "direct", "durable": True, "arguments": {"alternate-exchange": "ae"}, **second
    }
    error = refused(state, DeclareExchange("/", "x", **fields))
    assert error.reply_text == f"PRECONDITION_FAILED - {text}"


def test_exchange_arguments_other_than_ae_are_not_compared(state: MetadataState) -> None:
    state.apply(DeclareExchange("/", "x", "direct", arguments={"x-custom": 1}))
    assert state.apply(DeclareExchange("/", "x", "direct", arguments={"x-custom": 2})) == Applied()


def test_unknown_exchange_type_is_406_and_checked_first(state: MetadataState) -> None:
    error = refused(state, DeclareExchange("/", "amq.zzz", "x-unknown"))
    assert error.reply_text == "PRECONDITION_FAILED - unknown exchange type 'x-unknown'"


def test_amq_exchange_rules(state: MetadataState) -> None:
    assert state.apply(DeclareExchange("/", "amq.direct", "direct", durable=True)) == Applied()
    error = refused(state, DeclareExchange("/", "amq.direct", "direct", durable=False))
    assert error.reply_code == 406
    error = refused(state, DeclareExchange("/", "amq.mine", "direct"))
    assert error.reply_text == (
        "ACCESS_REFUSED - exchange name 'amq.mine' contains reserved prefix 'amq.*'"
    )
    error = refused(state, DeleteExchange("/", "amq.direct"))
    assert error.reply_text == (
        "ACCESS_REFUSED - deletion of system exchange 'amq.direct' in vhost '/' not allowed"
    )
    assert state.exchange("/", "amq.direct") is not None


def test_default_exchange_cannot_be_declared_or_deleted(state: MetadataState) -> None:
    for command in (DeclareExchange("/", "", "direct"), DeleteExchange("/", "")):
        error = refused(state, command)
        assert error.reply_text == (
            "ACCESS_REFUSED - operation not permitted on the default exchange"
        )
    with pytest.raises(MetadataError) as caught:
        state.passive_exchange("/", "")
    assert caught.value.reply_code == 403


def test_passive_exchange(state: MetadataState) -> None:
    assert state.passive_exchange("/", "amq.topic").type == "topic"
    with pytest.raises(MetadataError) as caught:
        state.passive_exchange("/", "nope")
    assert caught.value.reply_text == "NOT_FOUND - no exchange 'nope' in vhost '/'"


def test_invalid_exchange_arguments(state: MetadataState) -> None:
    error = refused(state, DeclareExchange("/", "x", "direct",
                                           arguments={"alternate-exchange": 1}))  # fmt: skip
    assert error.reply_text == (
        "PRECONDITION_FAILED - invalid type 'signedint' for arg 'alternate-exchange' in "
        "exchange 'x' in vhost '/'"
    )
    error = refused(state, DeclareExchange(
        "/", "h", "x-consistent-hash", arguments={"hash-header": "a", "hash-property": "b"}
    ))  # fmt: skip
    assert error.reply_code == 406


def test_delete_exchange_if_unused_and_idempotent(state: MetadataState) -> None:
    from logbroker.metadata import Bind

    state.apply(DeclareExchange("/", "x", "direct"))
    state.apply(DeclareQueue("/", "q"))
    state.apply(Bind("/", "x", "queue", "q", "k"))
    error = refused(state, DeleteExchange("/", "x", if_unused=True))
    assert error.reply_text == "PRECONDITION_FAILED - exchange 'x' in vhost '/' in use"
    assert state.apply(DeleteExchange("/", "x")).changed
    assert state.apply(DeleteExchange("/", "x")) == Applied()
