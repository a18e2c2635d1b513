"""Per-type binding indexes: how one exchange turns a message into destinations.

Theory of operation. Each exchange owns one index built for its type, so
routing costs what the type needs and no more:

- direct: dict routing key -> destinations, one lookup;
- fanout: the set of destinations, no look at the message;
- topic: a `TopicMatcher` trie;
- headers: a scan of compiled `HeadersPattern`s (no useful index exists for
  arbitrary header conditions);
- x-consistent-hash: a `ConsistentHashRing`, exactly one destination;
- x-federation-upstream: a fanout that drops what must not cross a federation link
  again (RabbitMQ's federation plugin declares one on its upstream, bound to the
  federated exchange, with `x-downstream-name` and `x-max-hops`): a message whose
  `x-received-from` already lists `x-max-hops` links, or the downstream itself.

The router guarantees that `add` is only called with a binding that passed
`validate` and is not held yet, and `remove` only with one that is held, so
the indexes keep reference counts without re-checking. Destination lists come
back in a deterministic order (binding order, or trie order for topics).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Protocol

from logbroker.routing.consistent_hash import ConsistentHashRing, HashSource, parse_weight
from logbroker.routing.errors import (
    InvalidBindingError,
    InvalidExchangeError,
    UnknownExchangeTypeError,
)
from logbroker.routing.headers_match import (
    HeadersPattern,
    compile_headers_pattern,
    validate_x_match,
)
from logbroker.routing.topic_matcher import TopicMatcher
from logbroker.routing.types import Binding, Destination, ExchangeSpec, RoutedMessage

DIRECT: Final = "direct"
FANOUT: Final = "fanout"
TOPIC: Final = "topic"
HEADERS: Final = "headers"
CONSISTENT_HASH: Final = "x-consistent-hash"
FEDERATION_UPSTREAM: Final = "x-federation-upstream"
EXCHANGE_TYPES: Final = frozenset({DIRECT, FANOUT, TOPIC, HEADERS, CONSISTENT_HASH,
                                   FEDERATION_UPSTREAM})
#: Types whose choice of bindings depends on the routing key alone (headers looks at
#: the headers, x-consistent-hash may hash a header or a property).
KEY_ONLY_TYPES: Final = frozenset({DIRECT, FANOUT, TOPIC})


class BindingIndex(Protocol):
    def validate(self, binding: Binding) -> None:
        """Raise InvalidBindingError when this exchange type refuses the binding."""

    def add(self, binding: Binding) -> None: ...

    def remove(self, binding: Binding) -> None: ...

    def destinations(self, message: RoutedMessage) -> Sequence[Destination]: ...


def _count_up(counts: dict[Destination, int], destination: Destination) -> None:
    counts[destination] = counts.get(destination, 0) + 1


def _count_down(counts: dict[Destination, int], destination: Destination) -> None:
    left = counts[destination] - 1
    if left:
        counts[destination] = left
    else:
        del counts[destination]


class DirectIndex:
    def __init__(self) -> None:
        # Counts, because bindings differing only in arguments all route alike.
        self._by_key: dict[str, dict[Destination, int]] = {}

    def validate(self, binding: Binding) -> None:
        return None

    def add(self, binding: Binding) -> None:
        _count_up(self._by_key.setdefault(binding.routing_key, {}), binding.destination)

    def remove(self, binding: Binding) -> None:
        counts = self._by_key[binding.routing_key]
        _count_down(counts, binding.destination)
        if not counts:
            del self._by_key[binding.routing_key]

    def destinations(self, message: RoutedMessage) -> Sequence[Destination]:
        counts = self._by_key.get(message.routing_key)
        return list(counts) if counts else []


class FanoutIndex:
    def __init__(self) -> None:
        self._counts: dict[Destination, int] = {}

    def validate(self, binding: Binding) -> None:
        return None

    def add(self, binding: Binding) -> None:
        _count_up(self._counts, binding.destination)

    def remove(self, binding: Binding) -> None:
        _count_down(self._counts, binding.destination)

    def destinations(self, message: RoutedMessage) -> Sequence[Destination]:
        return list(self._counts)


class FederationUpstreamIndex(FanoutIndex):
    """A fanout that forwards only what may still cross the link (see the module doc)."""

    def __init__(self, arguments: Mapping[str, object]) -> None:
        super().__init__()
        max_hops = arguments.get("x-max-hops", 1)
        self._max_hops = max_hops if isinstance(max_hops, int) else 1
        name = arguments.get("x-downstream-name")
        self._downstream = name.decode() if isinstance(name, bytes) else name

    def destinations(self, message: RoutedMessage) -> Sequence[Destination]:
        received = (message.headers or {}).get("x-received-from")
        if isinstance(received, list | tuple) and (
                len(received) >= self._max_hops or any(
                    isinstance(entry, Mapping) and _text(entry.get("cluster-name"))
                    == self._downstream for entry in received)):
            return []
        return super().destinations(message)


def _text(value: object) -> object:
    return value.decode() if isinstance(value, bytes) else value


class TopicIndex:
    def __init__(self) -> None:
        self._matcher: TopicMatcher[Destination] = TopicMatcher()

    def validate(self, binding: Binding) -> None:
        return None

    def add(self, binding: Binding) -> None:
        self._matcher.add(binding.routing_key, binding.destination)

    def remove(self, binding: Binding) -> None:
        self._matcher.remove(binding.routing_key, binding.destination)

    def destinations(self, message: RoutedMessage) -> Sequence[Destination]:
        return self._matcher.match_ordered(message.routing_key)


class HeadersIndex:
    def __init__(self) -> None:
        self._patterns: dict[Binding, HeadersPattern] = {}

    def validate(self, binding: Binding) -> None:
        try:
            validate_x_match(binding.arguments)
        except ValueError as error:
            raise InvalidBindingError(str(error)) from error

    def add(self, binding: Binding) -> None:
        self._patterns[binding] = compile_headers_pattern(binding.arguments)

    def remove(self, binding: Binding) -> None:
        del self._patterns[binding]

    def destinations(self, message: RoutedMessage) -> Sequence[Destination]:
        found: dict[Destination, None] = {}
        for binding, pattern in self._patterns.items():
            if binding.destination not in found and pattern.matches(message.headers):
                found[binding.destination] = None
        return list(found)


class ConsistentHashIndex:
    def __init__(self, source: HashSource) -> None:
        self._source = source
        self._ring: ConsistentHashRing[Destination] = ConsistentHashRing()

    def validate(self, binding: Binding) -> None:
        try:
            parse_weight(binding.routing_key)
        except ValueError as error:
            raise InvalidBindingError(str(error)) from error

    def add(self, binding: Binding) -> None:
        self._ring.add(binding.destination, parse_weight(binding.routing_key))

    def remove(self, binding: Binding) -> None:
        self._ring.remove(binding.destination, parse_weight(binding.routing_key))

    def destinations(self, message: RoutedMessage) -> Sequence[Destination]:
        chosen = self._ring.pick(self._source.value_to_hash(message))
        return [] if chosen is None else [chosen]


def _hash_source(arguments: Mapping[str, object]) -> HashSource:
    try:
        return HashSource.from_arguments(arguments)
    except ValueError as error:
        raise InvalidExchangeError(str(error)) from error


def make_index(spec: ExchangeSpec) -> BindingIndex:
    """An empty index for `spec`'s type; refuses unknown types and bad arguments."""
    if spec.type == DIRECT:
        return DirectIndex()
    if spec.type == FANOUT:
        return FanoutIndex()
    if spec.type == TOPIC:
        return TopicIndex()
    if spec.type == HEADERS:
        return HeadersIndex()
    if spec.type == CONSISTENT_HASH:
        return ConsistentHashIndex(_hash_source(spec.arguments))
    if spec.type == FEDERATION_UPSTREAM:
        return FederationUpstreamIndex(spec.arguments)
    raise UnknownExchangeTypeError(spec.type)
