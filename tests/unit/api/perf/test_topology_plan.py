"""`queue_names` and `plan_topology`: PerfTest's queue, pattern and routing keys."""

from __future__ import annotations

import pytest

from api.perf.topology_plan import MAX_QUEUES, plan_topology, queue_names


def test_one_queue_named_or_generated() -> None:
    assert queue_names("q", None, 1, None, "gen") == ("q",)
    assert queue_names(None, None, 1, None, "gen") == ("gen",)


def test_a_pattern_names_a_range_of_queues() -> None:
    assert queue_names(None, "perf-%d", 3, 5, "gen") == ("perf-3", "perf-4", "perf-5")


@pytest.mark.parametrize(("queue", "pattern", "first", "last", "flag"), [
    ("q", "p-%d", 1, 2, "--queue and --queue-pattern"),
    (None, "p", 1, 2, "--queue-pattern needs a %d"),
    (None, "p-%d", 1, None, "--queue-pattern-to"),
    (None, "p-%d", 5, 2, "--queue-pattern-to"),
    (None, "p-%d", 1, MAX_QUEUES + 1, "--queue-pattern names"),
])
def test_bad_queue_options_are_named(queue: str | None, pattern: str, first: int,
                                     last: int | None, flag: str) -> None:
    with pytest.raises(ValueError, match=flag):
        queue_names(queue, pattern, first, last, "gen")


def test_routing_keys_default_to_the_queue_names() -> None:
    plan = plan_topology("direct", "direct", ("a", "b"), None, pattern=True)
    assert [plan.queue_for(i) for i in range(3)] == ["a", "b", "a"]
    assert [plan.routing_key_for(i) for i in range(3)] == ["a", "b", "a"]
    assert plan.declares_exchange and plan.binds


def test_a_routing_key_is_used_for_one_queue() -> None:
    plan = plan_topology("ex", "topic", ("q",), "k.1", pattern=False)
    assert plan.routing_key_for(4) == "k.1"


def test_the_default_and_amq_exchanges_are_not_declared() -> None:
    default = plan_topology("", "direct", ("q",), None, pattern=False)
    assert not default.declares_exchange and not default.binds
    fanout = plan_topology("amq.fanout", "fanout", ("q",), None, pattern=False)
    assert not fanout.declares_exchange and fanout.binds
