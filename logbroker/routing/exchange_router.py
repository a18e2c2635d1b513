"""The routing table of one virtual host and the `route` function.

Theory of operation. The router holds the declared exchanges, each with the
binding index of its type (see `exchange_types`), plus two views of the
bindings: by source exchange (for listing and exchange deletion) and by
destination (for deleting a queue or an exchange that others bind to).

Routing a message is a breadth-first walk over exchanges, starting at the
one it was published to, as RabbitMQ's rabbit_exchange:route/2 does:

- each exchange asks its index for destinations; queues are collected,
  exchanges (exchange-to-exchange bindings) are queued for the walk;
- an exchange whose own bindings give no destination at all hands the
  message to its alternate exchange, which may in turn use its own;
- a set of exchanges already reached makes every exchange route a message at
  most once, so binding cycles and alternate-exchange cycles end;
- an alternate exchange that is not declared is skipped (RabbitMQ logs a
  warning and drops the message there).

A note on when the alternate exchange is used, since the seed text says "to
any queue": RabbitMQ tests the exchange's own destinations, which include
exchanges. If X (with an AE) routes to exchange Y and Y routes nowhere, X's AE
is not used (Y's AE would be). This router does the same.

The default exchange "" is implicit: a direct exchange bound to every queue
by its name, so it routes to the queue named by the routing key when that
queue exists (`queue_exists`). It has no alternate exchange, cannot be
declared, deleted or bound, but may be named as another exchange's AE.

Queue names come back once each, in the order the walk first reached them,
which is deterministic for a given history of declarations and bindings.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from logbroker.routing.errors import (
    ExchangeNotFoundError,
    InvalidBindingError,
    InvalidExchangeError,
)
from logbroker.routing.exchange_types import KEY_ONLY_TYPES, BindingIndex, make_index
from logbroker.routing.types import (
    Binding,
    Destination,
    ExchangeSpec,
    RoutedMessage,
    RoutingResult,
)

DEFAULT_EXCHANGE = ""


@dataclass(slots=True)
class _Exchange:
    spec: ExchangeSpec
    index: BindingIndex
    # Insertion-ordered set of the bindings whose source this exchange is.
    bindings: dict[Binding, None]


class ExchangeRouter:
    """Exchanges and bindings of one virtual host; routes messages to queues."""

    def __init__(self, queue_exists: Callable[[str], bool]) -> None:
        self._queue_exists = queue_exists
        self._exchanges: dict[str, _Exchange] = {}
        self._inbound: dict[Destination, dict[Binding, None]] = {}

    # -- exchanges ---------------------------------------------------------

    def has_exchange(self, name: str) -> bool:
        return name == DEFAULT_EXCHANGE or name in self._exchanges

    def exchange(self, name: str) -> ExchangeSpec:
        return self._get(name).spec

    def exchange_names(self) -> tuple[str, ...]:
        return tuple(self._exchanges)

    def declare_exchange(self, spec: ExchangeSpec) -> None:
        """Declare an exchange, or update one of the same type (arguments, AE).

        Updating keeps the bindings: policies change the effective AE of live
        exchanges. Changing the type is refused, as in AMQP.
        """
        if spec.name == DEFAULT_EXCHANGE:
            raise InvalidExchangeError("the default exchange cannot be declared")
        index = make_index(spec)
        current = self._exchanges.get(spec.name)
        if current is None:
            self._exchanges[spec.name] = _Exchange(spec, index, {})
            return
        if current.spec.type != spec.type:
            raise InvalidExchangeError(
                f"exchange '{spec.name}' is of type '{current.spec.type}', not '{spec.type}'"
            )
        # A new index, because arguments such as hash-header shape it.
        for binding in current.bindings:
            index.add(binding)
        current.spec = spec
        current.index = index

    def delete_exchange(self, name: str) -> tuple[Binding, ...]:
        """Delete an exchange and every binding from or to it; returns those bindings.

        The broker uses the returned bindings to auto-delete sources left
        without bindings.
        """
        if name == DEFAULT_EXCHANGE:
            raise InvalidExchangeError("the default exchange cannot be deleted")
        exchange = self._get(name)
        removed = list(exchange.bindings)
        for binding in removed:
            self._drop_inbound(binding)
        del self._exchanges[name]
        removed.extend(self.remove_bindings_to(Destination.exchange(name)))
        return tuple(removed)

    def _get(self, name: str) -> _Exchange:
        exchange = self._exchanges.get(name)
        if exchange is None:
            raise ExchangeNotFoundError(name)
        return exchange

    # -- bindings ----------------------------------------------------------

    def bind(self, binding: Binding) -> bool:
        """Add a binding; False when an identical one already exists (a no-op, as in AMQP)."""
        if binding.source == DEFAULT_EXCHANGE:
            raise InvalidBindingError("the default exchange cannot be bound from")
        destination = binding.destination
        if destination.kind == "exchange":
            if destination.name == DEFAULT_EXCHANGE:
                raise InvalidBindingError("the default exchange cannot be bound to")
            self._get(destination.name)
        source = self._get(binding.source)
        if binding in source.bindings:
            return False
        source.index.validate(binding)
        source.index.add(binding)
        source.bindings[binding] = None
        self._inbound.setdefault(destination, {})[binding] = None
        return True

    def unbind(self, binding: Binding) -> bool:
        """Remove a binding; False when it did not exist."""
        source = self._exchanges.get(binding.source)
        if source is None or binding not in source.bindings:
            return False
        self._unbind_from(source, binding)
        return True

    def bindings_of(self, name: str) -> tuple[Binding, ...]:
        """The bindings whose source is exchange `name`, in the order they were made.

        The default exchange's implicit bindings are not listed.
        """
        if name == DEFAULT_EXCHANGE:
            return ()
        return tuple(self._get(name).bindings)

    def bindings_to(self, destination: Destination) -> tuple[Binding, ...]:
        return tuple(self._inbound.get(destination, ()))

    def remove_bindings_to(self, destination: Destination) -> tuple[Binding, ...]:
        """Drop every binding leading to `destination` (a queue being deleted)."""
        removed = tuple(self._inbound.get(destination, ()))
        for binding in removed:
            self._unbind_from(self._exchanges[binding.source], binding)
        return removed

    def _unbind_from(self, source: _Exchange, binding: Binding) -> None:
        source.index.remove(binding)
        del source.bindings[binding]
        self._drop_inbound(binding)

    def _drop_inbound(self, binding: Binding) -> None:
        inbound = self._inbound[binding.destination]
        del inbound[binding]
        if not inbound:
            del self._inbound[binding.destination]

    # -- routing -----------------------------------------------------------

    def route(self, exchange_name: str, message: RoutedMessage) -> RoutingResult:
        """Where a message published to `exchange_name` goes."""
        if not self.has_exchange(exchange_name):
            raise ExchangeNotFoundError(exchange_name)
        queues: dict[str, None] = {}
        visited: list[str] = []
        reached = {exchange_name}
        pending = deque([exchange_name])
        while pending:
            name = pending.popleft()
            visited.append(name)
            for destination in self._destinations(name, message):
                if destination.kind == "queue":
                    queues[destination.name] = None
                elif destination.name not in reached and self.has_exchange(destination.name):
                    reached.add(destination.name)
                    pending.append(destination.name)
        by_key_only = all(name == DEFAULT_EXCHANGE
                          or self._exchanges[name].spec.type in KEY_ONLY_TYPES
                          for name in visited)
        return RoutingResult(queues=tuple(queues), exchanges_visited=tuple(visited),
                             by_key_only=by_key_only)

    def _destinations(self, name: str, message: RoutedMessage) -> Sequence[Destination]:
        """One exchange's destinations, or its alternate exchange when it has none."""
        if name == DEFAULT_EXCHANGE:
            key = message.routing_key
            return [Destination.queue(key)] if self._queue_exists(key) else []
        exchange = self._exchanges[name]
        found = exchange.index.destinations(message)
        alternate = exchange.spec.alternate_exchange
        if not found and alternate is not None:
            return [Destination.exchange(alternate)]
        return found
