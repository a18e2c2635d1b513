"""Policy matching, precedence against arguments, validation, and live application."""

from __future__ import annotations

from typing import Any

import pytest

from logbroker.metadata import (
    DeclareExchange,
    DeclareQueue,
    DeletePolicy,
    MetadataError,
    Policy,
    PolicyChanged,
    PutPolicy,
    effective_alternate_exchange,
    effective_queue_arguments,
    matching_policy,
    validate_definition,
)
from logbroker.metadata.policies import validate_policy
from tests.unit.logbroker.metadata.helpers import new_state


def policy(name: str, pattern: str, apply_to: str = "all", priority: int = 0,
           **definition: Any) -> Policy:  # fmt: skip
    return Policy("/", name, pattern, apply_to, priority, {k.replace("_", "-"): v
                                                           for k, v in definition.items()})


# -- matching ---------------------------------------------------------------


def test_patterns_are_unanchored_searches_like_re_run() -> None:
    p = policy("p", "ord", message_ttl=1)
    assert p.matches("queue", "orders") and p.matches("queue", "new-orders")
    anchored = policy("a", "^ord", message_ttl=1)
    assert anchored.matches("queue", "orders") and not anchored.matches("queue", "new-orders")
    assert policy("dot", r"^two\.", message_ttl=1).matches("queue", "two.q")
    assert not policy("dot", r"^two\.", message_ttl=1).matches("queue", "twoxq")


@pytest.mark.parametrize(
    ("apply_to", "queue", "exchange"),
    [
        ("all", True, True),
        ("queues", True, False),
        ("exchanges", False, True),
        ("classic_queues", True, False),
        ("quorum_queues", True, False),
        ("streams", True, False),
    ],
)
def test_apply_to(apply_to: str, queue: bool, exchange: bool) -> None:
    p = policy("p", ".*", apply_to, message_ttl=1)
    assert p.matches("queue", "n") is queue
    assert p.matches("exchange", "n") is exchange


def test_highest_priority_wins_and_ties_go_to_the_lowest_name() -> None:
    low = policy("low", ".*", priority=1, message_ttl=1)
    high = policy("high", "^q", priority=5, message_ttl=2)
    other = policy("zzz", "^q", priority=5, message_ttl=3)
    assert matching_policy([low, other, high], "queue", "q1") is high
    assert matching_policy([low, other, high], "queue", "x") is low
    assert matching_policy([policy("e", ".*", "exchanges", message_ttl=1)], "queue", "q") is None
    assert matching_policy([], "queue", "q") is None


def test_only_one_policy_applies_definitions_do_not_merge() -> None:
    ttl = policy("ttl", ".*", priority=0, message_ttl=5)
    length = policy("len", ".*", priority=1, max_length=3)
    chosen = matching_policy([ttl, length], "queue", "q")
    assert effective_queue_arguments({}, chosen) == {"x-max-length": 3}


# -- precedence -------------------------------------------------------------


@pytest.mark.parametrize("key", ["message-ttl", "expires", "max-length", "max-length-bytes",
                                 "delivery-limit"])  # fmt: skip
def test_numeric_limits_take_the_smaller_of_argument_and_policy(key: str) -> None:
    p = Policy("/", "p", ".*", definition={key: 100})
    assert effective_queue_arguments({f"x-{key}": 50}, p)[f"x-{key}"] == 50
    assert effective_queue_arguments({f"x-{key}": 500}, p)[f"x-{key}"] == 100
    assert effective_queue_arguments({}, p)[f"x-{key}"] == 100
    assert effective_queue_arguments({f"x-{key}": 7}, None)[f"x-{key}"] == 7


@pytest.mark.parametrize("key", ["dead-letter-exchange", "dead-letter-routing-key", "overflow",
                                 "queue-mode"])  # fmt: skip
def test_argument_wins_for_the_other_keys(key: str) -> None:
    values = {"overflow": ("reject-publish", "drop-head"), "queue-mode": ("lazy", "default")}
    from_argument, from_policy = values.get(key, ("arg", "pol"))
    p = Policy("/", "p", ".*", definition={key: from_policy})
    assert effective_queue_arguments({f"x-{key}": from_argument}, p)[f"x-{key}"] == from_argument
    assert effective_queue_arguments({}, p)[f"x-{key}"] == from_policy


def test_dead_letter_keys_resolve_independently() -> None:
    p = Policy("/", "p", ".*", definition={"dead-letter-exchange": "pdlx",
                                           "dead-letter-routing-key": "prk"})  # fmt: skip
    result = effective_queue_arguments({"x-dead-letter-exchange": "adlx"}, p)
    assert result["x-dead-letter-exchange"] == "adlx"
    assert result["x-dead-letter-routing-key"] == "prk"


def test_max_priority_comes_from_arguments_only() -> None:
    p = Policy("/", "p", ".*", definition={"max-priority": 9})
    assert "x-max-priority" not in effective_queue_arguments({}, p)
    assert effective_queue_arguments({"x-max-priority": 3}, p)["x-max-priority"] == 3


def test_leader_locator_policy_wins_and_uses_one_name() -> None:
    p = Policy("/", "p", ".*", definition={"queue-leader-locator": "balanced"})
    result = effective_queue_arguments({"x-queue-leader-locator": "client-local"}, p)
    assert result["x-queue-leader-locator"] == "balanced"
    legacy = Policy("/", "p", ".*", definition={"queue-master-locator": "min-masters"})
    result = effective_queue_arguments({"x-queue-master-locator": "client-local"}, legacy)
    assert result == {"x-queue-leader-locator": "balanced"}
    assert effective_queue_arguments({"x-queue-master-locator": "random"}, None) == {
        "x-queue-leader-locator": "random"
    }


def test_policy_only_keys_are_exposed_in_x_form() -> None:
    p = Policy("/", "p", ".*", definition={
        "ha-mode": "exactly", "ha-params": 2, "ha-sync-mode": "automatic",
        "ha-promote-on-failure": "always", "federation-upstream-set": "all",
        "alternate-exchange": "ae",
    })  # fmt: skip
    assert effective_queue_arguments({"x-custom": 1}, p) == {
        "x-custom": 1, "x-ha-mode": "exactly", "x-ha-params": 2, "x-ha-sync-mode": "automatic",
        "x-ha-promote-on-failure": "always", "x-federation-upstream-set": "all",
    }  # fmt: skip


def test_alternate_exchange_argument_wins() -> None:
    p = Policy("/", "p", ".*", "exchanges", definition={"alternate-exchange": "policy-ae"})
    assert effective_alternate_exchange({"alternate-exchange": "arg-ae"}, p) == "arg-ae"
    assert effective_alternate_exchange({}, p) == "policy-ae"
    assert effective_alternate_exchange({}, None) is None


# -- validation -------------------------------------------------------------


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        ({"bogus": 1}, '[{<<"bogus">>,1}] are not recognised policy settings'),
        ({}, "no policy provided"),
        ({"message-ttl": -1}, "-1 is not a valid message TTL"),
        ({"message-ttl": "1"}, '<<"1">> is not a valid message TTL'),
        ({"expires": 0}, "0 is not a valid queue expiry"),
        ({"max-length": True}, "true is not a valid maximum length"),
        ({"overflow": "explode"}, '<<"explode">> is not a valid overflow value'),
        ({"queue-leader-locator": "nearest"},
         '<<"nearest">> is not a valid queue leader locator value'),
        ({"ha-params": 2}, "ha-mode must be specified to specify ha-params, ha-sync-mode or "
                           "ha-promote-on-shutdown"),
        ({"ha-mode": "exactly"}, 'ha-mode="exactly" takes an integer, none given'),
        ({"ha-mode": "all", "ha-params": 1}, 'ha-mode="all" does not take parameters'),
        ({"ha-mode": "nodes", "ha-params": []}, 'ha-mode="nodes" list must be non-empty'),
        ({"ha-mode": "some"}, '<<"some">> is not a valid ha-mode value'),
        ({"ha-mode": "all", "ha-sync-mode": "eager"},
         'ha-sync-mode must be "manual" or "automatic", got <<"eager">>'),
        ({"ha-mode": "all", "ha-promote-on-shutdown": "never"},
         'ha-promote-on-shutdown must be "always" or "when-synced", got <<"never">>'),
        ({"federation-upstream": "a", "federation-upstream-set": "b"},
         "federation-upstream and federation-upstream-set are mutually exclusive"),
    ],
)  # fmt: skip
def test_invalid_definitions_are_406(definition: dict[str, Any], message: str) -> None:
    with pytest.raises(MetadataError) as caught:
        validate_definition(definition)
    assert caught.value.reply_code == 406
    assert caught.value.text == f"Validation failed\n\n{message}\n"


def test_valid_definitions() -> None:
    for definition in (
        {"message-ttl": 0, "expires": 1, "max-length": 0, "max-length-bytes": 10},
        {"dead-letter-exchange": "dlx", "dead-letter-routing-key": "rk", "overflow": "drop-head"},
        {"alternate-exchange": "ae", "max-priority": 10, "queue-leader-locator": "client-local"},
        {"queue-master-locator": "min-masters", "delivery-limit": 3, "max-age": "7D"},
        {"ha-mode": "exactly", "ha-params": 2, "ha-sync-mode": "automatic",
         "ha-promote-on-shutdown": "always", "ha-promote-on-failure": "when-synced"},
        {"ha-mode": "nodes", "ha-params": ["rabbit@a", "rabbit@b"]},
        {"ha-mode": "all", "federation-upstream-set": "all"},
    ):  # fmt: skip
        validate_definition(definition)


def test_policy_level_validation() -> None:
    with pytest.raises(MetadataError, match="not a valid regular expression"):
        validate_policy("(", "all", 0, {"message-ttl": 1})
    with pytest.raises(MetadataError, match="apply-to 'both' unrecognised"):
        validate_policy(".*", "both", 0, {"message-ttl": 1})
    with pytest.raises(MetadataError, match="priority must be a number"):
        validate_policy(".*", "all", "high", {"message-ttl": 1})


# -- live application through the state -------------------------------------


def test_policies_apply_live_to_existing_and_new_objects() -> None:
    state = new_state()
    state.apply(DeclareQueue("/", "orders", arguments={"x-message-ttl": 1000}))
    state.apply(DeclareQueue("/", "other"))
    applied = state.apply(PutPolicy("/", "ttl", "^ord", "queues", 0, {"message-ttl": 500}))
    assert applied.events == (PolicyChanged("/", "ttl", False, ("orders",), ()),)
    assert state.effective_queue_arguments("/", "orders")["x-message-ttl"] == 500
    state.apply(DeclareQueue("/", "ord2"))
    assert state.effective_queue_arguments("/", "ord2")["x-message-ttl"] == 500
    assert state.effective_policy("/", "queue", "other") is None
    applied = state.apply(PutPolicy("/", "ttl", "^ord", "queues", 0, {"message-ttl": 2000}))
    assert applied.events == (PolicyChanged("/", "ttl", False, ("orders", "ord2"), ()),)
    assert state.effective_queue_arguments("/", "orders")["x-message-ttl"] == 1000
    applied = state.apply(DeletePolicy("/", "ttl"))
    assert applied.events == (PolicyChanged("/", "ttl", True, ("orders", "ord2"), ()),)
    assert "x-message-ttl" not in state.effective_queue_arguments("/", "ord2")


def test_policy_sets_an_exchanges_alternate_exchange() -> None:
    state = new_state()
    state.apply(DeclareExchange("/", "x", "direct"))
    assert state.exchange_spec("/", "x").alternate_exchange is None
    applied = state.apply(PutPolicy("/", "ae", "^x$", "exchanges", 0, {"alternate-exchange": "a"}))
    assert applied.events == (PolicyChanged("/", "ae", False, (), ("x",)),)
    assert state.exchange_spec("/", "x").alternate_exchange == "a"


def test_put_policy_errors_leave_state_unchanged() -> None:
    state = new_state()
    before = state.snapshot()
    for command in (
        PutPolicy("/", "p", ".*", "all", 0, {"bogus": 1}),
        PutPolicy("nope", "p", ".*", "all", 0, {"message-ttl": 1}),
        DeletePolicy("/", "missing"),
    ):
        with pytest.raises(MetadataError):
            state.apply(command)
    assert state.snapshot() == before
