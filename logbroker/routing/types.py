"""Value types shared by the routing core.

Everything here is immutable so routing tables can hold them as keys and
callers cannot change a binding behind the router's back: argument tables are
copied into read-only mappings when a value is built. `Binding` is hashable
although its arguments are a table, because two bindings that differ only in
their arguments are distinct bindings in AMQP (`queue.bind` with the same
queue, exchange and key but other arguments adds a second binding).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

DestinationKind = Literal["queue", "exchange"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class Destination(NamedTuple):
    """Where a binding leads: a queue or (exchange-to-exchange) an exchange."""

    kind: DestinationKind
    name: str

    @classmethod
    def queue(cls, name: str) -> Destination:
        return cls("queue", name)

    @classmethod
    def exchange(cls, name: str) -> Destination:
        return cls("exchange", name)

    def __str__(self) -> str:
        # Also the stable text the consistent-hash ring hashes, so it must not
        # change between releases or nodes would disagree on the ring.
        return f"{self.kind}:{self.name}"


def freeze(value: Any) -> Hashable:
    """A hashable stand-in for an AMQP field value, equal whenever values are equal.

    Used only for hashing: it must never separate values that compare equal
    (1 and True, 1 and 1.0 hash alike in Python), or hash/eq would disagree.
    """
    if isinstance(value, Mapping):
        return frozenset((key, freeze(item)) for key, item in value.items())
    if isinstance(value, list | tuple):
        return tuple(freeze(item) for item in value)
    if isinstance(value, Hashable):
        return value
    return repr(value)


def _read_only(table: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(table)) if table else _EMPTY


@dataclass(frozen=True, slots=True)
class Binding:
    """A binding from exchange `source` to `destination`."""

    source: str
    destination: Destination
    routing_key: str = ""
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", _read_only(self.arguments))

    def __hash__(self) -> int:
        return hash((self.source, self.destination, self.routing_key, freeze(self.arguments)))


@dataclass(frozen=True, slots=True)
class ExchangeSpec:
    """An exchange as the router needs it.

    `alternate_exchange` is the effective AE: the broker resolves the
    `alternate-exchange` argument against policies before building this.
    """

    name: str
    type: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    alternate_exchange: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", _read_only(self.arguments))

    def __hash__(self) -> int:
        return hash((self.name, self.type, freeze(self.arguments), self.alternate_exchange))


@dataclass(frozen=True, slots=True)
class RoutedMessage:
    """The parts of a published message that routing may look at.

    `properties` uses AMQP basic property names (`message_id`,
    `correlation_id`, `timestamp`, ...); `headers` is the `headers` property,
    kept apart because headers exchanges and `hash-header` read it.
    """

    routing_key: str
    headers: Mapping[str, Any] | None = None
    properties: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RoutingResult:
    """Where a message went.

    `queues` holds each queue once, in the order routing first reached it;
    `exchanges_visited` every exchange that routed the message, in order,
    starting with the one it was published to. `by_key_only`: every exchange
    visited chose by the routing key alone, so any message published with the same
    exchange and key (to the same bindings) goes to the same queues.
    """

    queues: tuple[str, ...]
    exchanges_visited: tuple[str, ...]
    by_key_only: bool = field(default=False, compare=False)  # how, not where: not compared

    @property
    def routed(self) -> bool:
        return bool(self.queues)
