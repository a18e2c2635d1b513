"""What the cluster counted of an exchange: RabbitMQ's `publish_in` (messages published
to it) and `publish_out` (of those, routed on to a queue).

Each node counts the publishes it takes (`MessageStats.exchanges`) and samples them
(rate_sampling.py), so under `serve --workers N` or in a cluster an exchange's
publishes are spread over the nodes its publishers reached. Another node's figures
come back in its answer to `q.figures` (queue_figures.py), as plain JSON; any node
shows the sum over the nodes that answered, as the overview sums node counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from logbroker.broker import Broker
from logbroker.node_figures import points_from_wire
from logbroker.rate_samples import Point, sum_points

COUNTERS = ("publish_in", "publish_out")


def exchange_key(vhost: str, name: str) -> str:
    """The exchange's series in the node's `RateSampler`."""
    return f"x\0{vhost}\0{name}"


@dataclass(frozen=True, slots=True)
class ExchangeFigures:
    counters: Mapping[str, int] = field(default_factory=dict)
    rates: Mapping[str, float] = field(default_factory=dict)  # per second
    points: Sequence[Point] = ()  # at the grid asked, newest first


def local_exchange_figures(broker: Broker, vhost: str, name: str, grid: Sequence[int] = ()
                           ) -> ExchangeFigures:
    """What this node counted of the exchange (nothing: never published to here)."""
    counts = broker.publisher.stats.exchanges.get((vhost, name))
    if counts is None:
        return ExchangeFigures()
    key = exchange_key(vhost, name)
    return ExchangeFigures(dict(zip(COUNTERS, counts, strict=True)), broker.rates.rates(key),
                           broker.rates.values_at(key, grid) if grid else [])


def summed(parts: Iterable[ExchangeFigures]) -> ExchangeFigures:
    """Several nodes' figures of one exchange, added up."""
    counters: dict[str, int] = {}
    rates: dict[str, float] = {}
    points: list[Sequence[Point]] = []
    for part in parts:
        for name, value in part.counters.items():
            counters[name] = counters.get(name, 0) + value
        for name, rate in part.rates.items():
            rates[name] = round(rates.get(name, 0.0) + rate, 2)
        points.append(part.points)
    return ExchangeFigures(counters, rates, sum_points(points))


def to_wire(figures: ExchangeFigures) -> dict[str, Any]:
    return {"n": dict(figures.counters), "rt": dict(figures.rates),
            "p": [[t, v] for t, v in figures.points]}


def from_wire(wire: Any) -> ExchangeFigures:
    if not isinstance(wire, Mapping):
        return ExchangeFigures()
    return ExchangeFigures({str(k): int(v) for k, v in wire.get("n", {}).items()},
                           {str(k): float(v) for k, v in wire.get("rt", {}).items()},
                           points_from_wire(wire.get("p", ())))
