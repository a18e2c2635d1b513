"""What a node tells of itself for the overview and /api/nodes: its publishers' and its
queues' counts (`MessageStats`), their rates and history, and its resource alarms.

Every node samples its own `NODE_KEY` series; another node learns it over the
cluster link in the same answer as the queue figures it asked for
(queue_figures.py), as a plain JSON mapping (`to_wire` / `from_wire`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from logbroker.broker import Broker
from logbroker.rate_samples import Point

NODE_KEY = "node"


def node_sample(broker: Broker) -> dict[str, int]:
    stats = broker.publisher.stats
    return {"publish": stats.publish, "confirm": stats.confirm,
            "return_unroutable": stats.return_unroutable, **stats.queues.handed_out()}


@dataclass(frozen=True, slots=True)
class NodeFigures:
    counters: Mapping[str, int]
    rates: Mapping[str, float] = field(default_factory=dict)
    points: Sequence[Point] = ()  # at the grid asked for, newest first
    mem_alarm: bool = False
    disk_free_alarm: bool = False


def local_node_figures(broker: Broker, grid: Sequence[int] = ()) -> NodeFigures:
    alarms = broker.resources.alarms.active
    return NodeFigures(node_sample(broker), broker.rates.rates(NODE_KEY),
                       broker.rates.values_at(NODE_KEY, grid) if grid else [],
                       "memory" in alarms, "disk" in alarms)


def to_wire(figures: NodeFigures) -> dict[str, Any]:
    return {"n": dict(figures.counters), "rt": dict(figures.rates),
            "p": [[t, v] for t, v in figures.points],
            "mem": figures.mem_alarm, "disk": figures.disk_free_alarm}


def from_wire(wire: Mapping[str, Any]) -> NodeFigures:
    return NodeFigures({str(k): int(v) for k, v in wire.get("n", {}).items()},
                       {str(k): float(v) for k, v in wire.get("rt", {}).items()},
                       points_from_wire(wire.get("p", ())),
                       bool(wire.get("mem")), bool(wire.get("disk")))


def points_from_wire(wire: Sequence[Any]) -> list[Point]:
    return [(int(t), {str(k): int(v) for k, v in values.items()}) for t, values in wire]
