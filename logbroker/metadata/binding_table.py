"""The bindings of one vhost, indexed by source exchange and by destination.

Insertion-ordered, so listings and cascades are deterministic for a given
history of commands (a requirement of the replicated state machine).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from logbroker.routing import Binding, Destination

K = TypeVar("K")


class BindingTable:
    def __init__(self) -> None:
        self._all: dict[Binding, None] = {}
        self._by_source: dict[str, dict[Binding, None]] = {}
        self._by_destination: dict[Destination, dict[Binding, None]] = {}

    def __contains__(self, binding: Binding) -> bool:
        return binding in self._all

    def __iter__(self) -> Iterator[Binding]:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)

    def add(self, binding: Binding) -> bool:
        """Add; False when an identical binding is already there."""
        if binding in self._all:
            return False
        self._all[binding] = None
        self._by_source.setdefault(binding.source, {})[binding] = None
        self._by_destination.setdefault(binding.destination, {})[binding] = None
        return True

    def remove(self, binding: Binding) -> bool:
        """Remove; False when it was not there."""
        if binding not in self._all:
            return False
        del self._all[binding]
        _discard(self._by_source, binding.source, binding)
        _discard(self._by_destination, binding.destination, binding)
        return True

    def from_source(self, source: str) -> tuple[Binding, ...]:
        return tuple(self._by_source.get(source, ()))

    def has_source(self, source: str) -> bool:
        return source in self._by_source

    def to_destination(self, destination: Destination) -> tuple[Binding, ...]:
        return tuple(self._by_destination.get(destination, ()))


def _discard(index: dict[K, dict[Binding, None]], key: K, binding: Binding) -> None:
    entries = index[key]
    del entries[binding]
    if not entries:
        del index[key]
