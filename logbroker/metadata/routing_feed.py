"""Feeding the routing core from the metadata.

The routing core (`logbroker.routing.ExchangeRouter`) owns exchanges'
binding indexes and the route walk; the metadata owns declarations, bindings
and policies. `build_router` loads one vhost's exchanges (with their
effective alternate exchange) and bindings into a new router; afterwards
`apply_events` keeps it current from the events `MetadataState.apply`
returns, including policy changes that move an exchange's alternate exchange.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from logbroker.metadata.events import (
    BindingAdded,
    BindingRemoved,
    Event,
    ExchangeDeclared,
    ExchangeDeleted,
    PolicyChanged,
    QueueDeleted,
    VhostDeleted,
)
from logbroker.metadata.state import MetadataState
from logbroker.routing import Destination, ExchangeRouter


def build_router(
    state: MetadataState, vhost: str, queue_exists: Callable[[str], bool] | None = None
) -> ExchangeRouter:
    """A router for `vhost`; the default exchange routes to queues the state holds."""
    if queue_exists is None:

        def queue_exists(name: str) -> bool:
            return state.queue(vhost, name) is not None

    router = ExchangeRouter(queue_exists)
    for exchange in state.exchanges(vhost):
        router.declare_exchange(state.exchange_spec(vhost, exchange.name))
    for binding in state.bindings(vhost):
        router.bind(binding)
    return router


def apply_events(
    router: ExchangeRouter, state: MetadataState, vhost: str, events: Iterable[Event]
) -> None:
    """Bring `router` (built for `vhost`) up to date with `events`, already applied to `state`."""
    for event in events:
        if isinstance(event, ExchangeDeclared) and event.exchange.vhost == vhost:
            router.declare_exchange(state.exchange_spec(vhost, event.exchange.name))
        elif isinstance(event, BindingAdded) and event.vhost == vhost:
            router.bind(event.binding)
        elif isinstance(event, BindingRemoved) and event.vhost == vhost:
            router.unbind(event.binding)
        elif isinstance(event, ExchangeDeleted) and event.vhost == vhost:
            if router.has_exchange(event.name):
                router.delete_exchange(event.name)
        elif isinstance(event, QueueDeleted) and event.vhost == vhost:
            router.remove_bindings_to(Destination.queue(event.name))
        elif isinstance(event, PolicyChanged) and event.vhost == vhost:
            for name in event.exchanges:
                router.declare_exchange(state.exchange_spec(vhost, name))
        elif isinstance(event, VhostDeleted) and event.vhost == vhost:
            for name in router.exchange_names():
                router.delete_exchange(name)
