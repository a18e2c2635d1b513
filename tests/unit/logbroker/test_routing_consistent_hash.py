from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from logbroker.routing import (
    ConsistentHashRing,
    Destination,
    HashSource,
    RoutedMessage,
    parse_weight,
    stable_hash,
)

KEYS = [f"key-{number}".encode() for number in range(10_000)]


def spread(ring: ConsistentHashRing[str]) -> Counter[str | None]:
    return Counter(ring.pick(key) for key in KEYS)


def test_empty_ring_picks_nothing() -> None:
    ring: ConsistentHashRing[str] = ConsistentHashRing()
    assert ring.pick(b"anything") is None
    ring.add("q", 1)
    ring.remove("q", 1)
    assert ring.pick(b"anything") is None


def test_single_destination_gets_everything() -> None:
    ring: ConsistentHashRing[str] = ConsistentHashRing()
    ring.add("q", 1)
    assert spread(ring) == Counter({"q": len(KEYS)})


def test_distribution_is_roughly_proportional_to_weights() -> None:
    ring: ConsistentHashRing[str] = ConsistentHashRing()
    weights = {"q1": 1, "q2": 2, "q3": 3, "q4": 4}
    for destination, weight in weights.items():
        ring.add(destination, weight)
    counts = spread(ring)
    total_weight = sum(weights.values())
    for destination, weight in weights.items():
        expected = len(KEYS) * weight / total_weight
        assert abs(counts[destination] - expected) < 0.25 * expected, counts


def test_equal_weights_of_one_split_evenly_enough() -> None:
    ring: ConsistentHashRing[str] = ConsistentHashRing()
    for destination in ("a", "b"):
        ring.add(destination, 1)
    counts = spread(ring)
    assert 0.35 < counts["a"] / len(KEYS) < 0.65, counts


def test_adding_a_destination_moves_only_keys_to_it() -> None:
    ring: ConsistentHashRing[str] = ConsistentHashRing()
    for destination in ("a", "b", "c"):
        ring.add(destination, 1)
    before = {key: ring.pick(key) for key in KEYS}
    ring.add("d", 1)
    after = {key: ring.pick(key) for key in KEYS}
    moved = [key for key in KEYS if before[key] != after[key]]
    assert all(after[key] == "d" for key in moved)
    assert 0.15 < len(moved) / len(KEYS) < 0.35


def test_removing_a_destination_moves_only_its_keys() -> None:
    ring: ConsistentHashRing[str] = ConsistentHashRing()
    for destination in ("a", "b", "c"):
        ring.add(destination, 2)
    before = {key: ring.pick(key) for key in KEYS}
    assert ring.remove("b", 2) is True
    after = {key: ring.pick(key) for key in KEYS}
    for key in KEYS:
        if before[key] != "b":
            assert after[key] == before[key]
        else:
            assert after[key] in {"a", "c"}


def test_changing_a_weight_moves_only_that_destinations_keys() -> None:
    ring: ConsistentHashRing[str] = ConsistentHashRing()
    ring.add("a", 1)
    ring.add("b", 1)
    before = {key: ring.pick(key) for key in KEYS}
    ring.add("a", 2)
    after = {key: ring.pick(key) for key in KEYS}
    assert all(after[key] == "a" for key in KEYS if before[key] != after[key])
    ring.remove("a", 2)
    assert {key: ring.pick(key) for key in KEYS} == before


def test_remove_more_than_held_is_refused() -> None:
    ring: ConsistentHashRing[str] = ConsistentHashRing()
    ring.add("a", 1)
    assert ring.remove("a", 2) is False
    assert ring.remove("b", 1) is False
    assert ring.weight_of("a") == 1


def test_ring_is_independent_of_insertion_order() -> None:
    first: ConsistentHashRing[str] = ConsistentHashRing()
    second: ConsistentHashRing[str] = ConsistentHashRing()
    for destination in ("a", "b", "c"):
        first.add(destination, 1)
    for destination in ("c", "a", "b"):
        second.add(destination, 1)
    assert [first.pick(key) for key in KEYS[:500]] == [second.pick(key) for key in KEYS[:500]]


def test_stable_hash_is_fixed() -> None:
    # Pinned: nodes and releases must agree, so this value may never change.
    assert stable_hash(b"") == 0xE4A6A0577479B2B4
    assert stable_hash(b"queue:q1:0") == 0xABE429D4A25C95F6


@pytest.mark.parametrize(("key", "weight"), [("1", 1), ("10", 10), ("+3", 3), ("007", 7)])
def test_parse_weight(key: str, weight: int) -> None:
    assert parse_weight(key) == weight


@pytest.mark.parametrize("key", ["", "0", "-1", "one", "1.5", " 1", "1_0"])
def test_parse_weight_refuses(key: str) -> None:
    with pytest.raises(ValueError, match="binding key"):
        parse_weight(key)


def test_hash_source_defaults_to_routing_key() -> None:
    source = HashSource.from_arguments({})
    assert source.value_to_hash(RoutedMessage("abc")) == b"abc"


def test_hash_source_header() -> None:
    source = HashSource.from_arguments({"hash-header": "user"})
    message = RoutedMessage("rk", headers={"user": "alice"})
    assert source.value_to_hash(message) == b"alice"
    missing = source.value_to_hash(RoutedMessage("rk"))
    assert missing == source.value_to_hash(RoutedMessage("other", headers={}))
    assert missing != b"rk"


@pytest.mark.parametrize(
    ("prop", "value", "hashed"),
    [
        ("message_id", "m-1", b"m-1"),
        ("correlation_id", "c-1", b"c-1"),
        ("timestamp", 1700000000, b"1700000000"),
        ("timestamp", datetime.fromtimestamp(1700000000, tz=UTC), b"1700000000"),
    ],
)
def test_hash_source_property(prop: str, value: object, hashed: bytes) -> None:
    source = HashSource.from_arguments({"hash-property": prop})
    assert source.value_to_hash(RoutedMessage("rk", properties={prop: value})) == hashed


def test_hash_source_refusals() -> None:
    with pytest.raises(ValueError, match="mutually exclusive"):
        HashSource.from_arguments({"hash-header": "h", "hash-property": "message_id"})
    with pytest.raises(ValueError, match="unsupported property"):
        HashSource.from_arguments({"hash-property": "app_id"})


def test_ring_of_destinations_uses_stable_labels() -> None:
    ring: ConsistentHashRing[Destination] = ConsistentHashRing()
    ring.add(Destination.queue("q1"), 1)
    ring.add(Destination.queue("q2"), 1)
    assert str(Destination.queue("q1")) == "queue:q1"
    picks = {ring.pick(key) for key in KEYS[:200]}
    assert picks == {Destination.queue("q1"), Destination.queue("q2")}
