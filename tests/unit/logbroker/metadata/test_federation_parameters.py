"""Federation upstreams and upstream sets as runtime parameters, checked as RabbitMQ does."""

from typing import Any

import pytest

from logbroker.metadata import MetadataError, MetadataState, SetParameter

UPSTREAM = {"uri": "amqp://user:secret@upstream-host:5672/%2F", "prefetch-count": 500,
            "reconnect-delay": 1.5, "ack-mode": "on-confirm", "trust-user-id": False,
            "exchange": "orders", "max-hops": 2, "expires": 3_600_000, "message-ttl": 0}


def apply(component: str, name: str, value: Any) -> MetadataState:
    state = MetadataState.bootstrap("hash")
    state.apply(SetParameter.of("/", component, name, value))
    return state


def test_a_full_upstream_and_a_set_are_recorded() -> None:
    state = apply("federation-upstream", "up1", UPSTREAM)
    assert state.parameter("/", "federation-upstream", "up1") == UPSTREAM
    state.apply(SetParameter.of("/", "federation-upstream", "up2",
                                {"uri": ["amqp://a", "amqps://b:5671"]}))
    state.apply(SetParameter.of("/", "federation-upstream-set", "pair",
                                [{"upstream": "up1"}, {"upstream": "up2", "max-hops": 3}]))
    assert [name for _, name, _ in state.parameters("/")] == ["up1", "up2", "pair"]


@pytest.mark.parametrize(("component", "value", "named"), [
    ("federation-upstream", {}, "'uri'"),
    ("federation-upstream", {"uri": "http://host"}, "amqp:// or amqps://"),
    ("federation-upstream", {"uri": "amqp://"}, "with a host"),
    ("federation-upstream", {"uri": "amqp://h:port"}, "bad port"),
    ("federation-upstream", {"uri": ["amqp://h", 7]}, "'uri'"),
    ("federation-upstream", {"uri": "amqp://h", "ack-mode": "later"}, "'ack-mode'"),
    ("federation-upstream", {"uri": "amqp://h", "max-hops": 0}, "'max-hops'"),
    ("federation-upstream", {"uri": "amqp://h", "prefetch-count": "10"}, "'prefetch-count'"),
    ("federation-upstream", {"uri": "amqp://h", "colour": "red"}, "'colour'"),
    ("federation-upstream", ["amqp://h"], "JSON object"),
    ("federation-upstream-set", {"upstream": "up1"}, "JSON list"),
    ("federation-upstream-set", [], "JSON list"),
    ("federation-upstream-set", [{"name": "up1"}], '"upstream"'),
    ("federation-upstream-set", [{"upstream": "up1", "max-hops": -1}], "'max-hops'"),
])
def test_bad_definitions_are_refused_naming_the_key(
        component: str, value: Any, named: str) -> None:
    with pytest.raises(MetadataError) as refused:
        apply(component, "x", value)
    assert refused.value.reply_code == 406 and named in refused.value.text


def test_the_implicit_set_all_cannot_be_defined() -> None:
    with pytest.raises(MetadataError, match="implicit"):
        apply("federation-upstream-set", "all", [{"upstream": "up1"}])


def test_a_password_in_a_refused_uri_is_not_repeated() -> None:
    with pytest.raises(MetadataError) as refused:
        apply("federation-upstream", "x", {"uri": "http://user:hunter2@host"})
    assert "hunter2" not in refused.value.text
