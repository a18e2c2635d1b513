from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.routing import TopicMatcher, split_words


def reference_match(binding_key: str, routing_key: str) -> bool:
    """The definition, straight: recursive over words, no trie, no memo."""

    def walk(pattern: list[str], words: list[str]) -> bool:
        if not pattern:
            return not words
        head, rest = pattern[0], pattern[1:]
        if head == "#":
            return any(walk(rest, words[skip:]) for skip in range(len(words) + 1))
        if not words:
            return False
        return (head == "*" or head == words[0]) and walk(rest, words[1:])

    return walk(split_words(binding_key), split_words(routing_key))


def matcher_with(*bindings: tuple[str, str]) -> TopicMatcher[str]:
    matcher: TopicMatcher[str] = TopicMatcher()
    for key, destination in bindings:
        matcher.add(key, destination)
    return matcher


TUTORIAL = matcher_with(("*.orange.*", "Q1"), ("*.*.rabbit", "Q2"), ("lazy.#", "Q2"))


@pytest.mark.parametrize(
    ("routing_key", "expected"),
    [
        ("quick.orange.rabbit", {"Q1", "Q2"}),
        ("lazy.orange.elephant", {"Q1", "Q2"}),
        ("quick.orange.fox", {"Q1"}),
        ("lazy.brown.fox", {"Q2"}),
        ("lazy.pink.rabbit", {"Q2"}),
        ("quick.brown.fox", set()),
        ("orange", set()),
        ("quick.orange.male.rabbit", set()),
        ("lazy.orange.male.rabbit", {"Q2"}),
    ],
)
def test_tutorial_examples(routing_key: str, expected: set[str]) -> None:
    assert TUTORIAL.match(routing_key) == expected


def test_lazy_pink_rabbit_is_listed_once() -> None:
    assert TUTORIAL.match_ordered("lazy.pink.rabbit") == ["Q2"]


@pytest.mark.parametrize(
    ("binding_key", "routing_key", "matches"),
    [
        ("#", "", True),
        ("#", "a", True),
        ("#", "a.b.c", True),
        ("#", "..", True),
        ("", "", True),
        ("", "a", False),
        ("*", "", False),
        ("*", "a", True),
        ("*", "a.b", False),
        ("*", ".", False),
        ("*.*", ".", True),
        ("a.#", "a", True),
        ("a.#", "a.b.c", True),
        ("a.#", "b", False),
        ("a.#", "", False),
        ("#.a", "a", True),
        ("#.a", "x.y.a", True),
        ("#.a", "a.x", False),
        ("a.#.b", "a.b", True),
        ("a.#.b", "a.x.y.b", True),
        ("a.#.b", "a.x.y", False),
        ("a.*.b", "a.b", False),
        ("a..b", "a..b", True),
        ("a.*.b", "a..b", True),
        ("a..b", "a.b", False),
        ("a.", "a.", True),
        ("a.", "a", False),
        ("#.#", "", True),
        ("#.#", "a.b", True),
        ("#.*.#", "", False),
        ("#.*.#", "a", True),
        ("a.#.#.b", "a.b", True),
        ("a.#.b.#.c", "a.x.b.y.z.c", True),
        ("a.#.b.#.c", "a.c.b", False),
        ("*.#", "", False),
        ("*.#", "a", True),
        ("a#", "ab", False),
        ("a#", "a#", True),
        ("a*b", "axb", False),
    ],
)
def test_edge_cases(binding_key: str, routing_key: str, matches: bool) -> None:
    matcher = matcher_with((binding_key, "d"))
    assert (matcher.match(routing_key) == {"d"}) is matches
    assert reference_match(binding_key, routing_key) is matches


def test_routing_key_words_that_look_like_wildcards_are_literal_words() -> None:
    matcher = matcher_with(("a.*", "star"), ("a.b", "literal"), ("a.#", "hash"))
    assert matcher.match("a.*") == {"star", "hash"}
    assert matcher.match("a.#") == {"star", "hash"}


def test_many_hashes_do_not_explode() -> None:
    key = ".".join(["#"] * 30 + ["z"])
    matcher = matcher_with((key, "d"))
    long_miss = ".".join(["a"] * 200)
    assert matcher.match(long_miss) == set()
    assert matcher.match(long_miss + ".z") == {"d"}


def test_remove_undoes_one_add_and_prunes() -> None:
    matcher = matcher_with(("a.*.c", "d"), ("a.*.c", "d"), ("a.#", "e"))
    assert len(matcher) == 3
    assert matcher.remove("a.*.c", "d") is True
    assert matcher.match("a.b.c") == {"d", "e"}
    assert matcher.remove("a.*.c", "d") is True
    assert matcher.match("a.b.c") == {"e"}
    assert matcher.remove("a.*.c", "d") is False
    assert matcher.remove("a.x", "e") is False
    assert matcher.remove("a.#", "e") is True
    assert len(matcher) == 0
    assert matcher.match("a") == set()
    assert matcher._root.is_empty()


def test_order_is_deterministic_for_the_same_history() -> None:
    bindings = [("#", "h"), ("a.*", "s"), ("a.b", "l"), ("*.b", "t")]
    first = matcher_with(*bindings).match_ordered("a.b")
    second = matcher_with(*bindings).match_ordered("a.b")
    assert first == second
    assert sorted(first) == ["h", "l", "s", "t"]


WORDS = st.sampled_from(["a", "b", "", "*", "#"])
ROUTING_WORDS = st.sampled_from(["a", "b", "c", "", "*", "#"])


def keys(words: st.SearchStrategy[str], max_size: int) -> st.SearchStrategy[str]:
    # [] -> "" (no words); [""] cannot be written, "" already means no words.
    return st.lists(words, max_size=max_size).map(".".join)


@settings(max_examples=400, deadline=None)
@given(
    binding_keys=st.lists(keys(WORDS, 6), min_size=1, max_size=8),
    routing_keys=st.lists(keys(ROUTING_WORDS, 7), min_size=1, max_size=8),
)
def test_matches_reference_implementation(binding_keys: list[str], routing_keys: list[str]) -> None:
    matcher: TopicMatcher[int] = TopicMatcher()
    for number, key in enumerate(binding_keys):
        matcher.add(key, number)
    for routing_key in routing_keys:
        expected = {
            number for number, key in enumerate(binding_keys) if reference_match(key, routing_key)
        }
        assert matcher.match(routing_key) == expected, routing_key


@settings(max_examples=200, deadline=None)
@given(
    binding_keys=st.lists(keys(WORDS, 5), min_size=1, max_size=8),
    removed=st.sets(st.integers(min_value=0, max_value=7)),
    routing_key=keys(ROUTING_WORDS, 6),
)
def test_removal_matches_reference(
    binding_keys: list[str], removed: set[int], routing_key: str
) -> None:
    matcher: TopicMatcher[int] = TopicMatcher()
    for number, key in enumerate(binding_keys):
        matcher.add(key, number)
    for number in removed:
        if number < len(binding_keys):
            assert matcher.remove(binding_keys[number], number) is True
    expected = {
        number
        for number, key in enumerate(binding_keys)
        if number not in removed and reference_match(key, routing_key)
    }
    assert matcher.match(routing_key) == expected
