"""Topic exchange matching: a trie of binding keys.

Theory of operation. Routing and binding keys are split on "." into words; the
empty key has no words at all (as in RabbitMQ, so "" is matched by "#" and by
the binding key "" only), while "a..b" has an empty middle word. In a binding
key "*" stands for exactly one word and "#" for zero or more; any other word,
including one that merely contains "*" or "#", is literal.

Binding keys live in a trie with one edge per word. Matching walks the trie
with the routing key's words, following at each node the literal edge for the
next word, the "*" edge, and the "#" edge. A node reached through a "#" edge
may also swallow the next word and stay where it is; that self-loop is what
makes "#" mean "zero or more". The walk is a search over states (node,
position); each state is expanded once, so the cost is bounded by
nodes x (words + 1) however many "#" a key has, instead of the exponential
blow-up of naive backtracking on keys like "#.#.#.a".

The trie keeps a count per (binding key, destination): the router may hold two
bindings that differ only in their arguments, and removing one must not drop
the other. Children and destinations are kept in insertion-ordered dicts, so
`match_ordered` gives the same order in every process for the same history
(Python's set order for strings changes with hash randomisation).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

D = TypeVar("D", bound=Hashable)

STAR = "*"
HASH = "#"


def split_words(key: str) -> list[str]:
    """Words of a routing or binding key; the empty key has none."""
    return key.split(".") if key else []


class _Node(Generic[D]):
    __slots__ = ("children", "destinations", "is_hash")

    def __init__(self, is_hash: bool) -> None:
        self.children: dict[str, _Node[D]] = {}
        # destination -> how many bindings with this exact key lead there
        self.destinations: dict[D, int] = {}
        self.is_hash = is_hash

    def is_empty(self) -> bool:
        return not self.children and not self.destinations


class TopicMatcher(Generic[D]):
    """Binding keys (with `*` and `#`) to destinations, matched against routing keys."""

    def __init__(self) -> None:
        self._root: _Node[D] = _Node(is_hash=False)
        self._count = 0

    def __len__(self) -> int:
        """Number of (binding key, destination) additions currently held."""
        return self._count

    def add(self, binding_key: str, destination: D) -> None:
        node = self._root
        for word in split_words(binding_key):
            child = node.children.get(word)
            if child is None:
                child = node.children[word] = _Node(is_hash=word == HASH)
            node = child
        node.destinations[destination] = node.destinations.get(destination, 0) + 1
        self._count += 1

    def remove(self, binding_key: str, destination: D) -> bool:
        """Undo one `add`; False when there was none to undo."""
        path: list[tuple[_Node[D], str]] = []
        node = self._root
        for word in split_words(binding_key):
            child = node.children.get(word)
            if child is None:
                return False
            path.append((node, word))
            node = child
        held = node.destinations.get(destination, 0)
        if held == 0:
            return False
        if held == 1:
            del node.destinations[destination]
        else:
            node.destinations[destination] = held - 1
        self._count -= 1
        self._prune(path, node)
        return True

    @staticmethod
    def _prune(path: list[tuple[_Node[D], str]], leaf: _Node[D]) -> None:
        # Empty branches would otherwise slow every later match that walks them.
        node = leaf
        for parent, word in reversed(path):
            if not node.is_empty():
                return
            del parent.children[word]
            node = parent

    def match(self, routing_key: str) -> set[D]:
        return set(self.match_ordered(routing_key))

    def match_ordered(self, routing_key: str) -> list[D]:
        """Matching destinations, each once, in a deterministic order."""
        words = split_words(routing_key)
        end = len(words)
        found: dict[D, None] = {}
        seen: set[tuple[int, int]] = set()
        stack: list[tuple[_Node[D], int]] = [(self._root, 0)]
        while stack:
            node, position = stack.pop()
            state = (id(node), position)
            if state in seen:
                continue
            seen.add(state)
            if node.is_hash and position < end:
                stack.append((node, position + 1))
            hash_child = node.children.get(HASH)
            if hash_child is not None:
                stack.append((hash_child, position))
            if position == end:
                found.update(dict.fromkeys(node.destinations))
                continue
            star_child = node.children.get(STAR)
            if star_child is not None:
                stack.append((star_child, position + 1))
            literal_child = node.children.get(words[position])
            if literal_child is not None:
                stack.append((literal_child, position + 1))
        return list(found)
