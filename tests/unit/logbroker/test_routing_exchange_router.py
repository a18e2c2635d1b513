from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from logbroker.routing import (
    Binding,
    Destination,
    ExchangeNotFoundError,
    ExchangeRouter,
    ExchangeSpec,
    InvalidBindingError,
    InvalidExchangeError,
    RoutedMessage,
    RoutingResult,
    UnknownExchangeTypeError,
)

Q = Destination.queue
X = Destination.exchange


def make_router(queues: set[str] | None = None) -> ExchangeRouter:
    existing = queues if queues is not None else set()
    return ExchangeRouter(queue_exists=existing.__contains__)


def declare(
    router: ExchangeRouter,
    name: str,
    exchange_type: str = "direct",
    ae: str | None = None,
    **arguments: Any,
) -> None:
    router.declare_exchange(ExchangeSpec(name, exchange_type, arguments, ae))


def bind(
    router: ExchangeRouter,
    source: str,
    destination: Destination,
    key: str = "",
    args: dict[str, Any] | None = None,
) -> Binding:
    binding = Binding(source, destination, key, args or {})
    assert router.bind(binding) is True
    return binding


def msg(
    routing_key: str = "", headers: dict[str, Any] | None = None, **props: Any
) -> RoutedMessage:
    return RoutedMessage(routing_key, headers, props)


def queues(router: ExchangeRouter, exchange: str, message: RoutedMessage) -> tuple[str, ...]:
    return router.route(exchange, message).queues


# -- exchange types ------------------------------------------------------------


def test_direct_routes_on_exact_key() -> None:
    router = make_router()
    declare(router, "d")
    bind(router, "d", Q("a"), "k1")
    bind(router, "d", Q("b"), "k1")
    bind(router, "d", Q("c"), "k2")
    assert queues(router, "d", msg("k1")) == ("a", "b")
    assert queues(router, "d", msg("k2")) == ("c",)
    assert queues(router, "d", msg("k3")) == ()
    assert queues(router, "d", msg("k1.x")) == ()


def test_direct_delivers_once_per_queue_despite_two_bindings() -> None:
    router = make_router()
    declare(router, "d")
    bind(router, "d", Q("a"), "k", {"note": 1})
    bind(router, "d", Q("a"), "k", {"note": 2})
    assert queues(router, "d", msg("k")) == ("a",)
    assert router.unbind(Binding("d", Q("a"), "k", {"note": 1})) is True
    assert queues(router, "d", msg("k")) == ("a",)


def test_fanout_ignores_the_routing_key() -> None:
    router = make_router()
    declare(router, "f", "fanout")
    bind(router, "f", Q("a"), "ignored")
    bind(router, "f", Q("b"))
    assert queues(router, "f", msg("anything")) == ("a", "b")
    assert queues(router, "f", msg("")) == ("a", "b")


def test_topic_tutorial() -> None:
    router = make_router()
    declare(router, "topic_logs", "topic")
    bind(router, "topic_logs", Q("Q1"), "*.orange.*")
    bind(router, "topic_logs", Q("Q2"), "*.*.rabbit")
    bind(router, "topic_logs", Q("Q2"), "lazy.#")
    expected = {
        "quick.orange.rabbit": {"Q1", "Q2"},
        "lazy.orange.elephant": {"Q1", "Q2"},
        "quick.orange.fox": {"Q1"},
        "lazy.brown.fox": {"Q2"},
        "lazy.pink.rabbit": {"Q2"},
        "quick.brown.fox": set(),
        "quick.orange.male.rabbit": set(),
        "lazy.orange.male.rabbit": {"Q2"},
    }
    for routing_key, wanted in expected.items():
        routed = queues(router, "topic_logs", msg(routing_key))
        assert len(routed) == len(set(routed))
        assert set(routed) == wanted, routing_key


def test_headers_exchange() -> None:
    router = make_router()
    declare(router, "h", "headers")
    bind(router, "h", Q("all"), "", {"x-match": "all", "source": "profile", "object": "image"})
    bind(router, "h", Q("any"), "", {"x-match": "any", "source": "profile", "object": "video"})
    bind(router, "h", Q("tenant"), "", {"x-match": "all-with-x", "x-tenant": "acme"})
    headers = {"source": "profile", "object": "image", "x-tenant": "acme"}
    assert queues(router, "h", msg(headers=headers)) == ("all", "any", "tenant")
    assert queues(router, "h", msg(headers={"object": "video"})) == ("any",)
    assert queues(router, "h", msg()) == ()


def test_headers_binding_with_bad_x_match_is_refused() -> None:
    router = make_router()
    declare(router, "h", "headers")
    with pytest.raises(InvalidBindingError, match="x-match"):
        router.bind(Binding("h", Q("a"), "", {"x-match": "some"}))
    assert router.bindings_of("h") == ()


def test_consistent_hash_exchange_picks_one_queue_by_weight() -> None:
    router = make_router()
    declare(router, "chx", "x-consistent-hash")
    bind(router, "chx", Q("q1"), "1")
    bind(router, "chx", Q("q2"), "3")
    counts: Counter[str] = Counter()
    for number in range(4000):
        routed = queues(router, "chx", msg(f"order-{number}"))
        assert len(routed) == 1
        counts[routed[0]] += 1
    assert 0.15 < counts["q1"] / 4000 < 0.35
    assert queues(router, "chx", msg("same")) == queues(router, "chx", msg("same"))


def test_consistent_hash_on_header_and_property() -> None:
    router = make_router()
    declare(router, "by-user", "x-consistent-hash", **{"hash-header": "user"})
    declare(router, "by-id", "x-consistent-hash", **{"hash-property": "message_id"})
    for name in ("by-user", "by-id"):
        for number in range(8):
            bind(router, name, Q(f"{name}-{number}"), "1")
    by_user = {queues(router, "by-user", msg(f"rk{n}", {"user": "alice"})) for n in range(50)}
    assert len(by_user) == 1
    by_id = {queues(router, "by-id", msg(f"rk{n}", message_id="m-7")) for n in range(50)}
    assert len(by_id) == 1


def test_consistent_hash_refusals() -> None:
    router = make_router()
    with pytest.raises(InvalidExchangeError, match="mutually exclusive"):
        declare(router, "c", "x-consistent-hash", **{"hash-header": "h", "hash-property": "x"})
    declare(router, "c", "x-consistent-hash")
    with pytest.raises(InvalidBindingError):
        router.bind(Binding("c", Q("q"), "heavy"))
    with pytest.raises(InvalidBindingError):
        router.bind(Binding("c", Q("q"), "0"))
    assert queues(router, "c", msg("k")) == ()


def test_unknown_exchange_type_is_refused() -> None:
    router = make_router()
    with pytest.raises(UnknownExchangeTypeError):
        declare(router, "x", "x-delayed-message")
    assert not router.has_exchange("x")


# -- the default exchange --------------------------------------------------------


def test_default_exchange_routes_to_the_named_queue() -> None:
    router = make_router({"orders"})
    assert router.route("", msg("orders")) == RoutingResult(("orders",), ("",))
    assert router.route("", msg("nope")) == RoutingResult((), ("",))
    assert router.has_exchange("")
    assert router.bindings_of("") == ()


def test_default_exchange_cannot_be_declared_deleted_or_bound() -> None:
    router = make_router()
    declare(router, "d")
    with pytest.raises(InvalidExchangeError):
        declare(router, "")
    with pytest.raises(InvalidExchangeError):
        router.delete_exchange("")
    with pytest.raises(InvalidBindingError):
        router.bind(Binding("", Q("q"), "q"))
    with pytest.raises(InvalidBindingError):
        router.bind(Binding("d", X(""), "k"))


def test_default_exchange_as_alternate_exchange() -> None:
    router = make_router({"fallback"})
    declare(router, "d", ae="")
    assert router.route("d", msg("fallback")) == RoutingResult(("fallback",), ("d", ""))


# -- exchange-to-exchange ----------------------------------------------------------


def test_exchange_to_exchange_chain() -> None:
    router = make_router()
    declare(router, "entry", "topic")
    declare(router, "middle", "fanout")
    declare(router, "last", "direct")
    bind(router, "entry", X("middle"), "logs.#")
    bind(router, "middle", Q("archive"))
    bind(router, "middle", X("last"))
    bind(router, "last", Q("errors"), "logs.error")
    bind(router, "entry", Q("errors"), "#")
    result = router.route("entry", msg("logs.error"))
    assert result.queues == ("errors", "archive")
    assert result.exchanges_visited == ("entry", "middle", "last")
    assert router.route("entry", msg("metrics")).exchanges_visited == ("entry",)


def test_exchange_binding_cycle_terminates_and_routes_each_exchange_once() -> None:
    router = make_router()
    for name in ("a", "b", "c"):
        declare(router, name, "fanout")
    bind(router, "a", X("b"))
    bind(router, "b", X("c"))
    bind(router, "c", X("a"))
    bind(router, "c", X("c"))
    bind(router, "b", Q("qb"))
    bind(router, "c", Q("qc"))
    result = router.route("a", msg("k"))
    assert result.queues == ("qb", "qc")
    assert result.exchanges_visited == ("a", "b", "c")
    assert router.route("c", msg("k")).exchanges_visited == ("c", "a", "b")


def test_diamond_delivers_once() -> None:
    router = make_router()
    for name in ("top", "left", "right", "bottom"):
        declare(router, name, "fanout")
    bind(router, "top", X("left"))
    bind(router, "top", X("right"))
    bind(router, "left", X("bottom"))
    bind(router, "right", X("bottom"))
    bind(router, "bottom", Q("q"))
    bind(router, "left", Q("q"))
    result = router.route("top", msg())
    assert result.queues == ("q",)
    assert Counter(result.exchanges_visited) == Counter(["top", "left", "right", "bottom"])


def test_binding_to_a_missing_exchange_is_refused() -> None:
    router = make_router()
    declare(router, "a")
    with pytest.raises(ExchangeNotFoundError):
        router.bind(Binding("a", X("ghost"), "k"))
    with pytest.raises(ExchangeNotFoundError):
        router.bind(Binding("ghost", Q("q"), "k"))


# -- alternate exchanges ---------------------------------------------------------


def seed_example() -> ExchangeRouter:
    router = make_router()
    declare(router, "my-direct", "direct", ae="my-ae")
    declare(router, "my-ae", "fanout")
    bind(router, "my-direct", Q("routed"), "key1")
    bind(router, "my-ae", Q("unrouted"))
    return router


def test_alternate_exchange_takes_unroutable_messages() -> None:
    router = seed_example()
    assert router.route("my-direct", msg("key1")) == RoutingResult(("routed",), ("my-direct",))
    assert router.route("my-direct", msg("key2")) == RoutingResult(
        ("unrouted",), ("my-direct", "my-ae")
    )


def test_alternate_exchange_chain_and_cycle() -> None:
    router = make_router()
    declare(router, "a", ae="b")
    declare(router, "b", ae="c")
    declare(router, "c", ae="a")
    assert router.route("a", msg("k")) == RoutingResult((), ("a", "b", "c"))
    bind(router, "c", Q("last-resort"), "k")
    assert router.route("a", msg("k")) == RoutingResult(("last-resort",), ("a", "b", "c"))
    assert router.route("b", msg("k")).exchanges_visited == ("b", "c")


def test_exchange_that_is_its_own_alternate_terminates() -> None:
    router = make_router()
    declare(router, "self", ae="self")
    assert router.route("self", msg("k")) == RoutingResult((), ("self",))


def test_missing_alternate_exchange_is_skipped() -> None:
    router = make_router()
    declare(router, "a", ae="ghost")
    assert router.route("a", msg("k")) == RoutingResult((), ("a",))


def test_alternate_exchange_not_used_when_an_exchange_binding_matched() -> None:
    # RabbitMQ uses the AE only when the exchange itself has no destination;
    # an exchange-to-exchange binding is a destination even if it leads nowhere.
    router = make_router()
    declare(router, "x", ae="ae")
    declare(router, "y", "fanout")
    declare(router, "ae", "fanout")
    bind(router, "x", X("y"), "k")
    bind(router, "ae", Q("unrouted"))
    assert router.route("x", msg("k")) == RoutingResult((), ("x", "y"))
    assert router.route("x", msg("other")).queues == ("unrouted",)


def test_downstream_exchange_uses_its_own_alternate() -> None:
    router = make_router()
    declare(router, "x")
    declare(router, "y", "direct", ae="y-ae")
    declare(router, "y-ae", "fanout")
    bind(router, "x", X("y"), "k")
    bind(router, "y-ae", Q("y-unrouted"))
    assert router.route("x", msg("k")) == RoutingResult(("y-unrouted",), ("x", "y", "y-ae"))


def test_redeclare_updates_the_alternate_exchange_and_keeps_bindings() -> None:
    router = seed_example()
    declare(router, "my-direct", "direct")
    assert queues(router, "my-direct", msg("key2")) == ()
    assert queues(router, "my-direct", msg("key1")) == ("routed",)
    with pytest.raises(InvalidExchangeError, match="type"):
        declare(router, "my-direct", "fanout")


def test_redeclare_consistent_hash_with_new_hash_source() -> None:
    router = make_router()
    declare(router, "c", "x-consistent-hash")
    for number in range(6):
        bind(router, "c", Q(f"q{number}"), "1")
    declare(router, "c", "x-consistent-hash", **{"hash-header": "h"})
    picked = {queues(router, "c", msg(f"rk{n}", {"h": "same"})) for n in range(40)}
    assert len(picked) == 1
    assert len(router.bindings_of("c")) == 6


# -- bindings bookkeeping ----------------------------------------------------------


def test_bind_is_idempotent_and_unbind_reports_existence() -> None:
    router = make_router()
    declare(router, "d")
    binding = bind(router, "d", Q("a"), "k", {"x": 1})
    assert router.bind(Binding("d", Q("a"), "k", {"x": 1})) is False
    assert router.bindings_of("d") == (binding,)
    assert router.unbind(Binding("d", Q("a"), "k", {"x": 2})) is False
    assert router.unbind(binding) is True
    assert router.unbind(binding) is False
    assert router.unbind(Binding("ghost", Q("a"), "k")) is False
    assert queues(router, "d", msg("k")) == ()


def test_unbind_each_type_stops_routing() -> None:
    cases: list[tuple[str, str, dict[str, Any]]] = [
        ("direct", "k", {}),
        ("fanout", "", {}),
        ("topic", "k.#", {}),
        ("headers", "", {"x-match": "any", "h": 1}),
        ("x-consistent-hash", "2", {}),
    ]
    for exchange_type, key, args in cases:
        router = make_router()
        declare(router, "e", exchange_type)
        binding = bind(router, "e", Q("q"), key, args)
        message = msg("k", {"h": 1})
        assert queues(router, "e", message) == ("q",), exchange_type
        assert router.unbind(binding) is True
        assert queues(router, "e", message) == (), exchange_type


def test_delete_exchange_drops_bindings_both_ways() -> None:
    router = make_router()
    declare(router, "up", "fanout")
    declare(router, "mid", "fanout")
    declare(router, "down", "fanout")
    up_mid = bind(router, "up", X("mid"))
    mid_down = bind(router, "mid", X("down"))
    mid_q = bind(router, "mid", Q("q"))
    removed = router.delete_exchange("mid")
    assert set(removed) == {up_mid, mid_down, mid_q}
    assert not router.has_exchange("mid")
    assert router.bindings_of("up") == ()
    assert router.bindings_to(X("down")) == ()
    assert router.bindings_to(Q("q")) == ()
    assert router.route("up", msg()) == RoutingResult((), ("up",))
    with pytest.raises(ExchangeNotFoundError):
        router.route("mid", msg())
    with pytest.raises(ExchangeNotFoundError):
        router.delete_exchange("mid")
    with pytest.raises(ExchangeNotFoundError):
        router.bindings_of("mid")


def test_remove_bindings_to_a_deleted_queue() -> None:
    router = make_router()
    declare(router, "d")
    declare(router, "t", "topic")
    first = bind(router, "d", Q("q"), "a")
    second = bind(router, "t", Q("q"), "#")
    bind(router, "t", Q("other"), "#")
    assert router.bindings_to(Q("q")) == (first, second)
    assert router.remove_bindings_to(Q("q")) == (first, second)
    assert queues(router, "t", msg("a")) == ("other",)
    assert queues(router, "d", msg("a")) == ()
    assert router.remove_bindings_to(Q("q")) == ()


def test_routing_to_a_missing_exchange_raises() -> None:
    router = make_router()
    with pytest.raises(ExchangeNotFoundError) as raised:
        router.route("nope", msg())
    assert raised.value.name == "nope"


def test_exchange_lookup() -> None:
    router = make_router()
    declare(router, "d", "direct", ae="ae", durable_hint=True)
    spec = router.exchange("d")
    assert spec.type == "direct"
    assert spec.alternate_exchange == "ae"
    assert dict(spec.arguments) == {"durable_hint": True}
    assert router.exchange_names() == ("d",)


def test_binding_arguments_are_read_only_copies() -> None:
    arguments: dict[str, Any] = {"x-match": "any", "a": 1}
    binding = Binding("h", Q("q"), "", arguments)
    arguments["b"] = 2
    assert dict(binding.arguments) == {"x-match": "any", "a": 1}
    with pytest.raises(TypeError):
        binding.arguments["c"] = 3  # type: ignore[index]
    assert hash(binding) == hash(Binding("h", Q("q"), "", {"a": 1, "x-match": "any"}))


def test_a_route_is_by_key_only_when_no_visited_exchange_looks_past_the_key() -> None:
    router = make_router({"q"})
    declare(router, "t", "topic", ae="h")
    declare(router, "f", "fanout")
    declare(router, "h", "headers")
    bind(router, "t", X("f"), "a.*")
    bind(router, "f", Q("q"))
    bind(router, "h", Q("q"), args={"x-match": "any", "k": "v"})
    assert router.route("", msg("q")).by_key_only  # the default exchange
    routed = router.route("t", msg("a.b"))
    assert routed.queues == ("q",) and routed.by_key_only  # topic, then fanout
    unroutable = router.route("t", msg("x", {"k": "v"}))  # to its alternate, a headers one
    assert unroutable.queues == ("q",) and not unroutable.by_key_only
    assert not router.route("h", msg("a.b", {"k": "v"})).by_key_only


def test_x_federation_upstream_forwards_what_may_still_cross_the_link() -> None:
    router = make_router({"link-q"})
    declare(router, "federation: x -> rabbit@d", "x-federation-upstream",
            **{"x-downstream-name": "rabbit@d", "x-downstream-vhost": "/", "x-max-hops": 2})
    bind(router, "federation: x -> rabbit@d", Destination.queue("link-q"), "ignored")
    fresh = msg("any.key")
    once = msg("k", headers={"x-received-from": [{"cluster-name": "elsewhere"}]})
    twice = msg("k", headers={"x-received-from": [{"cluster-name": "a"}, {"cluster-name": "b"}]})
    looped = msg("k", headers={"x-received-from": [{"cluster-name": b"rabbit@d"}]})
    assert queues(router, "federation: x -> rabbit@d", fresh) == ("link-q",)
    assert queues(router, "federation: x -> rabbit@d", once) == ("link-q",)
    assert queues(router, "federation: x -> rabbit@d", twice) == ()  # x-max-hops reached
    assert queues(router, "federation: x -> rabbit@d", looped) == ()  # back to the downstream
