"""`TopologyPlan`: the exchange, queues and bindings a run declares, and which queue each
producer and consumer uses.

As PerfTest: one queue (`--queue`, else a generated name), or `--queue-pattern`
with `%d` over `--queue-pattern-from` .. `--queue-pattern-to`. Each queue is
bound to the exchange with its routing key: `--routing-key`, else the queue's
name (with a pattern, always the queue's name, so each producer feeds its own
queue). Producer i and consumer i take queue i modulo the number of queues.
The default exchange ("") and `amq.*` exchanges are not declared or bound.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_QUEUES = 10_000


@dataclass(frozen=True)
class TopologyPlan:
    exchange: str
    exchange_type: str
    queues: tuple[str, ...]
    routing_keys: tuple[str, ...]  # one per queue

    @property
    def declares_exchange(self) -> bool:
        return self.exchange != "" and not self.exchange.startswith("amq.")

    @property
    def binds(self) -> bool:
        return self.exchange != ""

    def queue_for(self, index: int) -> str:
        return self.queues[index % len(self.queues)]

    def routing_key_for(self, index: int) -> str:
        return self.routing_keys[index % len(self.routing_keys)]


def queue_names(queue: str | None, pattern: str | None, first: int, last: int | None,
                generated: str) -> tuple[str, ...]:
    """The run's queues; ValueError naming the flag when they make no sense."""
    if pattern is None:
        return (queue or generated,)
    if queue is not None:
        raise ValueError("--queue and --queue-pattern exclude each other")
    if "%d" not in pattern:
        raise ValueError(f"--queue-pattern needs a %d, as in 'perf-test-%d': {pattern!r}")
    if last is None:
        raise ValueError("--queue-pattern needs --queue-pattern-to")
    if last < first:
        raise ValueError(f"--queue-pattern-to ({last}) is below --queue-pattern-from ({first})")
    if last - first + 1 > MAX_QUEUES:
        raise ValueError(f"--queue-pattern names {last - first + 1} queues; at most "
                         f"{MAX_QUEUES}")
    return tuple(pattern.replace("%d", str(number)) for number in range(first, last + 1))


def plan_topology(exchange: str, exchange_type: str, queues: tuple[str, ...],
                  routing_key: str | None, pattern: bool) -> TopologyPlan:
    keys = (routing_key,) if routing_key is not None and not pattern else queues
    return TopologyPlan(exchange, exchange_type, queues, keys)
