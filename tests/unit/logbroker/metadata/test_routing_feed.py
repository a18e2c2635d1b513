from __future__ import annotations

from logbroker.metadata import (
    Bind,
    DeclareExchange,
    DeclareQueue,
    DeleteQueue,
    PutPolicy,
    Unbind,
    apply_events,
    build_router,
)
from logbroker.routing import RoutedMessage
from tests.unit.logbroker.metadata.helpers import new_state


def test_router_follows_the_metadata() -> None:
    state = new_state()
    state.apply(DeclareExchange("/", "x", "direct", auto_delete=True))
    state.apply(DeclareExchange("/", "ae", "fanout"))
    state.apply(DeclareQueue("/", "q"))
    state.apply(DeclareQueue("/", "lost"))
    state.apply(Bind("/", "x", "queue", "q", "k"))
    state.apply(Bind("/", "ae", "queue", "lost"))
    router = build_router(state, "/")
    assert router.route("x", RoutedMessage("k")).queues == ("q",)
    assert router.route("", RoutedMessage("q")).queues == ("q",)
    assert router.route("x", RoutedMessage("other")).queues == ()

    def apply(command: object) -> None:
        apply_events(router, state, "/", state.apply(command).events)  # type: ignore[arg-type]

    apply(PutPolicy("/", "ae", "^x$", "exchanges", 0, {"alternate-exchange": "ae"}))
    assert router.route("x", RoutedMessage("other")).queues == ("lost",)
    apply(DeclareExchange("/", "y", "topic"))
    apply(Bind("/", "y", "queue", "q", "#"))
    assert router.route("y", RoutedMessage("a.b")).queues == ("q",)
    apply(Unbind("/", "x", "queue", "q", "k"))  # x is auto-delete: it goes too
    assert not router.has_exchange("x")
    apply(DeleteQueue("/", "q"))
    assert router.route("y", RoutedMessage("a.b")).queues == ()
    assert router.route("", RoutedMessage("q")).queues == ()
