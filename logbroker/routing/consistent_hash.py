"""The `x-consistent-hash` exchange: a weighted hash ring.

Theory of operation. Each binding's routing key is its weight, a positive
integer. A destination of total weight w owns `w * points_per_weight` points
on a ring of 64-bit values; point i is the hash of "<destination>:<i>". A
message hashes to a value on the same ring and goes to the owner of the first
point at or after it, wrapping around. So the share of messages a destination
gets is proportional to its weight, and adding or removing a binding moves
only messages to or from that binding's destination: every other point stays
where it was.

RabbitMQ uses jump consistent hashing over `weight` buckets. That spreads
exactly by weight but renumbers buckets when a binding goes, moving other
queues' keys. A ring keeps the movement minimal instead; `points_per_weight`
virtual points per unit of weight keep the spread close to the weights even
for the common weights 1 and 2 (with one point per unit, two queues of
weight 1 could split 90/10).

Hashes are BLAKE2b truncated to 64 bits: stable across processes, versions and
nodes, unlike Python's salted `hash()`, so every node routes a key alike.

What is hashed: the routing key by default; with the exchange argument
`hash-header`, that header's value; with `hash-property`, one of the
properties `message_id`, `correlation_id` or `timestamp` (RabbitMQ hashes the
timestamp's decimal text). A message without the header or property hashes
a fixed "undefined" value, so all such messages go to one destination, as in
RabbitMQ (it hashes the atom `undefined`).
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Generic, TypeVar

from logbroker.routing.types import RoutedMessage

D = TypeVar("D", bound=Hashable)

HASH_HEADER: Final = "hash-header"
HASH_PROPERTY: Final = "hash-property"
HASHABLE_PROPERTIES: Final = frozenset({"message_id", "correlation_id", "timestamp"})
DEFAULT_POINTS_PER_WEIGHT: Final = 100

_UNDEFINED: Final = b"\x00undefined"
_WEIGHT = re.compile(r"[+-]?[0-9]+")


def stable_hash(data: bytes) -> int:
    """A 64-bit hash that is the same in every process and on every node."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def parse_weight(binding_key: str) -> int:
    """The weight a binding key stands for; ValueError unless a positive integer."""
    if not _WEIGHT.fullmatch(binding_key):
        raise ValueError(f"the binding key must be an integer: {binding_key!r}")
    weight = int(binding_key)
    if weight < 1:
        raise ValueError("the binding key must be greater than 0")
    return weight


@dataclass(frozen=True, slots=True)
class HashSource:
    """What a consistent-hash exchange hashes: the routing key, a header or a property."""

    header: str | None = None
    property: str | None = None

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any]) -> HashSource:
        """Read `hash-header` / `hash-property`; ValueError for what RabbitMQ refuses."""
        header = _text_argument(arguments, HASH_HEADER)
        prop = _text_argument(arguments, HASH_PROPERTY)
        if header is not None and prop is not None:
            raise ValueError("hash-header and hash-property are mutually exclusive")
        if prop is not None and prop not in HASHABLE_PROPERTIES:
            raise ValueError(f"unsupported property: {prop}")
        return cls(header=header, property=prop)

    def value_to_hash(self, message: RoutedMessage) -> bytes:
        if self.header is not None:
            headers = message.headers or {}
            return _field_bytes(headers.get(self.header))
        if self.property is not None:
            value = message.properties.get(self.property)
            if self.property == "timestamp" and value is not None:
                return _timestamp_text(value).encode()
            return _field_bytes(value)
        return message.routing_key.encode("utf-8")


def _text_argument(arguments: Mapping[str, Any], name: str) -> str | None:
    value = arguments.get(name)
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, str):
        return value
    raise ValueError(f"{name} must be a string, not {type(value).__name__}")


def _timestamp_text(value: Any) -> str:
    # AMQP timestamps are whole seconds; some clients decode them to datetime.
    if isinstance(value, datetime):
        return str(int(value.timestamp()))
    return str(value)


def _field_bytes(value: Any) -> bytes:
    if value is None:
        return _UNDEFINED
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bool):
        return b"true" if value else b"false"
    if isinstance(value, int):
        return str(value).encode()
    return repr(value).encode("utf-8")


class ConsistentHashRing(Generic[D]):
    """Destinations with weights on a hash ring; `pick` maps a key to one of them.

    `label` turns a destination into the stable text its points are derived
    from; it must be stable across processes (never `repr` of an object with
    an id in it).
    """

    def __init__(
        self,
        points_per_weight: int = DEFAULT_POINTS_PER_WEIGHT,
        label: Callable[[D], str] = str,
    ) -> None:
        if points_per_weight < 1:
            raise ValueError("points_per_weight must be at least 1")
        self._points_per_weight = points_per_weight
        self._label = label
        self._weights: dict[D, int] = {}
        # Each destination's point hashes, so a rebuild only sorts.
        self._points: dict[D, list[int]] = {}
        # Sorted ring, rebuilt lazily after a change: binding churn comes in
        # bursts (declare time), routing is the hot path.
        self._hashes: list[int] = []
        self._owners: list[D] = []
        self._dirty = False

    def __len__(self) -> int:
        return len(self._weights)

    def weight_of(self, destination: D) -> int:
        return self._weights.get(destination, 0)

    def add(self, destination: D, weight: int) -> None:
        """Add `weight` to a destination (a second binding to it adds up)."""
        if weight < 1:
            raise ValueError("weight must be at least 1")
        total = self._weights.get(destination, 0) + weight
        self._weights[destination] = total
        points = self._points.setdefault(destination, [])
        label = self._label(destination)
        for i in range(len(points), total * self._points_per_weight):
            points.append(stable_hash(f"{label}:{i}".encode()))
        self._dirty = True

    def remove(self, destination: D, weight: int) -> bool:
        """Take `weight` off a destination; False when it does not hold that much."""
        held = self._weights.get(destination, 0)
        if weight < 1 or held < weight:
            return False
        if held == weight:
            del self._weights[destination]
            del self._points[destination]
        else:
            self._weights[destination] = held - weight
            # Dropping the highest-numbered points keeps the rest in place.
            del self._points[destination][(held - weight) * self._points_per_weight :]
        self._dirty = True
        return True

    def pick(self, key: bytes) -> D | None:
        """The destination owning `key`, or None when the ring is empty."""
        if self._dirty:
            self._rebuild()
        if not self._hashes:
            return None
        index = bisect.bisect_left(self._hashes, stable_hash(key))
        return self._owners[index % len(self._owners)]

    def _rebuild(self) -> None:
        # Ties (vanishingly rare) break on the label, never on insertion
        # order, so every node builds the same ring from the same bindings.
        # Packing (hash, label rank) into one int keeps the sort on plain ints.
        ranked = sorted(self._points, key=self._label)
        count = len(ranked)
        keys = [
            point * count + rank
            for rank, destination in enumerate(ranked)
            for point in self._points[destination]
        ]
        keys.sort()
        self._hashes = [key // count for key in keys]
        self._owners = [ranked[key % count] for key in keys]
        self._dirty = False
