"""What any node tells of a queue: its counts, rates and retained range, wherever it is led.

A queue's figures live with its log, on the node that leads it: ready and
unacked messages, consumers, the retained range, its counters and their rates
and history (sampled there, rate_samples.py), and each follower's lag as the
leader's replication feed knows it. A node asked about queues it does not lead
asks their leaders over the cluster link, batched: one `q.figures` request per
node (per few thousand queues), answered with the figures of each (and
that node's own figures, node_figures.py, and its counts of the exchanges asked,
exchange_figures.py), within `FIGURES_TIMEOUT_S`, so a
dead or paused node never hangs a page. When a leader is down, unreachable or
slow, this node's in-sync copy still gives the retained range (its end is the
high watermark it last heard, a little behind the leader) and the counts are
unknown (None). So every node shows cluster-wide figures (`logbroker list
queues`, `GET /api/queues`, the overview), not blanks for the queues it does
not lead.

`remote_figures` / `queue_range` ask one queue's leader (`q.counts`) for a
consumer group's lag.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from logbroker.broker import Broker
from logbroker.errors import BrokerError
from logbroker.exchange_figures import ExchangeFigures, local_exchange_figures, summed
from logbroker.exchange_figures import from_wire as exchange_from_wire
from logbroker.exchange_figures import to_wire as exchange_to_wire
from logbroker.node_figures import (
    NodeFigures,
    from_wire,
    local_node_figures,
    points_from_wire,
    to_wire,
)
from logbroker.queue.queue_shell import QueueShell
from logbroker.rate_samples import Point

FIGURES_TIMEOUT_S = 2.0  # a node that answers later is shown unknown
# Queues one request names, so that an answer stays far below the link's frame limit
# (64 MiB): about 400 bytes a queue, or up to ~25 KiB with ten minutes of samples.
MAX_ASKED = 5000
MAX_ASKED_WITH_SAMPLES = 200


def queue_key(vhost: str, name: str) -> str:
    """The queue's series in the node's `RateSampler`."""
    return f"q\0{vhost}\0{name}"


def queue_sample(shell: QueueShell) -> dict[str, int]:
    """What is sampled of a queue: its counters and lengths, under RabbitMQ's names."""
    counters, core = shell.counters, shell.core
    return {"publish": counters.published, **counters.handed_out(),
            "messages": core.message_count + core.unacked_count,
            "messages_ready": core.message_count,
            "messages_unacknowledged": core.unacked_count}


@dataclass(frozen=True, slots=True)
class QueueFigures:
    """A queue as its leader reported it; None: not known (leader down or slow)."""

    messages_ready: int | None
    consumers: int | None
    first_offset: int | None
    next_offset: int | None
    messages_unacknowledged: int | None = None
    counters: Mapping[str, int] = field(default_factory=dict)  # `queue_sample`'s
    rates: Mapping[str, float] = field(default_factory=dict)  # per second, of the same
    # Messages each follower has not persisted yet (None: the feed does not know it).
    follower_lags: Mapping[str, int | None] = field(default_factory=dict)
    points: Sequence[Point] = ()  # the sampled series at the grid asked, newest first
    log_bytes: int | None = None  # the leader's log on disk (None: not told)
    log_segments: int | None = None

    @property
    def leader_reachable(self) -> bool:
        return self.messages_ready is not None


def local_figures(broker: Broker, shell: QueueShell, grid: Sequence[int] = ()
                  ) -> QueueFigures:
    """The figures of a queue led here."""
    key = queue_key(shell.settings.vhost, shell.name)
    lags: dict[str, int | None] = {}
    gate, record = shell.replication, broker.state.queue(shell.settings.vhost, shell.name)
    if gate is not None and record is not None:
        lags = {member: gate.leader.lag(member) for member in record.members
                if member != broker.config.node_name}
    core = shell.core
    return QueueFigures(core.message_count, core.consumer_count, shell.log_start_offset,
                        shell.readable_end, core.unacked_count, queue_sample(shell),
                        broker.rates.rates(key),
                        lags, broker.rates.values_at(key, grid) if grid else [],
                        shell.log.size_bytes, shell.log.segment_count)


def _unknown(broker: Broker, vhost: str, name: str) -> QueueFigures:
    """A queue whose leader did not answer: the range of this node's copy, if any."""
    view = broker.replay_view(vhost, name)
    if view is None:
        return QueueFigures(None, None, None, None)
    return QueueFigures(None, None, view.log_start_offset, view.readable_end)


def _queue_to_wire(figures: QueueFigures) -> dict[str, Any]:
    return {"r": figures.messages_ready, "u": figures.messages_unacknowledged,
            "c": figures.consumers, "f": figures.first_offset, "e": figures.next_offset,
            "n": dict(figures.counters), "rt": dict(figures.rates),
            "l": dict(figures.follower_lags), "p": [[t, v] for t, v in figures.points],
            "b": figures.log_bytes, "s": figures.log_segments}


def _queue_from_wire(wire: Mapping[str, Any]) -> QueueFigures:
    def count(key: str) -> int | None:
        value = wire.get(key)
        return None if value is None else int(value)

    return QueueFigures(count("r"), count("c"), count("f"), count("e"), count("u"),
                        {str(k): int(v) for k, v in wire.get("n", {}).items()},
                        {str(k): float(v) for k, v in wire.get("rt", {}).items()},
                        {str(k): None if v is None else int(v)
                         for k, v in wire.get("l", {}).items()},
                        points_from_wire(wire.get("p", ())), count("b"), count("s"))


def figures_answer(broker: Broker, header: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to another node's `q.figures`: each named queue led here (None for
    one not led here), and this node's own figures."""
    grid = [int(t) for t in header.get("grid") or ()]
    answers: list[dict[str, Any] | None] = []
    for vhost, name in list(header.get("queues") or ())[:MAX_ASKED]:
        shell = broker.queue(str(vhost), str(name))
        answers.append(None if shell is None else _queue_to_wire(local_figures(
            broker, shell, grid)))
    exchanges = [exchange_to_wire(local_exchange_figures(broker, str(vhost), str(name), grid))
                 for vhost, name in list(header.get("exchanges") or ())[:MAX_ASKED]]
    return {"queues": answers, "node": to_wire(local_node_figures(broker, grid)),
            "x": exchanges}


@dataclass
class ClusterFigures:
    """Figures of queues and nodes gathered for one request."""

    queues: dict[tuple[str, str], QueueFigures]
    nodes: dict[str, NodeFigures | None]  # None: the node did not answer
    # Summed over this node and those that answered (the exchanges asked for).
    exchanges: dict[tuple[str, str], ExchangeFigures] = field(default_factory=dict)


async def cluster_figures(broker: Broker, queues: Iterable[tuple[str, str]],
                          grid: Sequence[int] = (), every_node: bool = False,
                          exchanges: Sequence[tuple[str, str]] = ()) -> ClusterFigures:
    """The figures of `queues` (vhost, name), led here or elsewhere, and of this node
    (with `every_node`: of every other node up too), asking each other node once; with
    `exchanges`, also what every node counted of them (the first `MAX_ASKED` only, or
    `MAX_ASKED_WITH_SAMPLES` with a grid: beyond, this node's counts alone)."""
    here = broker.config.node_name
    found: dict[tuple[str, str], QueueFigures] = {}
    asked: dict[str, list[tuple[str, str]]] = {}
    for vhost, name in queues:
        shell = broker.queue(vhost, name)
        record = broker.state.queue(vhost, name)
        if shell is not None:
            found[(vhost, name)] = local_figures(broker, shell, grid)
        elif record is not None and record.leader_node not in (None, here) \
                and broker.remote is not None:
            asked.setdefault(str(record.leader_node), []).append((vhost, name))
        else:
            found[(vhost, name)] = _unknown(broker, vhost, name)
    if (every_node or exchanges) and broker.remote is not None:
        for member in broker.state.cluster_nodes():
            if member.name != here and member.up:
                asked.setdefault(member.name, [])
    nodes: dict[str, NodeFigures | None] = {here: local_node_figures(broker, grid)}
    size = MAX_ASKED_WITH_SAMPLES if grid else MAX_ASKED
    told = list(exchanges[:size])
    counted = {key: [local_exchange_figures(broker, *key, grid)] for key in exchanges}
    requests = [(node, keys[start:start + size], told if start == 0 else [])
                for node, keys in asked.items() for start in range(0, max(len(keys), 1), size)]
    answers = await asyncio.gather(*(_ask(broker, node, keys, told_here, grid)
                                     for node, keys, told_here in requests))
    for (node, keys, told_here), answer in zip(requests, answers, strict=True):
        if node not in nodes or answer is None:
            nodes[node] = None if answer is None else answer[1]
        for index, key in enumerate(keys):
            figures = None if answer is None else answer[0][index]
            found[key] = figures if figures is not None else _unknown(broker, *key)
        if answer is not None and len(answer[2]) == len(told_here):
            for key, told_figures in zip(told_here, answer[2], strict=True):
                counted[key].append(told_figures)
    return ClusterFigures(found, nodes, {key: summed(parts) for key, parts in counted.items()})


async def _ask(broker: Broker, node: str, keys: list[tuple[str, str]],
               exchanges: list[tuple[str, str]], grid: Sequence[int]
               ) -> tuple[list[QueueFigures | None], NodeFigures, list[ExchangeFigures]] | None:
    """One node's answer to `q.figures` (None: down, unreachable or too slow)."""
    assert broker.remote is not None
    try:
        wire = await broker.remote.figures(
            node, {"queues": [list(key) for key in keys], "grid": list(grid),
                   "exchanges": [list(key) for key in exchanges]},
            FIGURES_TIMEOUT_S)
    except BrokerError:
        return None
    queues = [None if one is None else _queue_from_wire(one) for one in wire.get("queues", ())]
    if len(queues) != len(keys):
        return None
    return (queues, from_wire(wire.get("node", {})),
            [exchange_from_wire(one) for one in wire.get("x", ())])


async def remote_figures(broker: Broker, vhost: str, name: str) -> QueueFigures:
    """The counts and range of a queue this node does not lead, from its leader."""
    if broker.remote is not None:
        try:
            endpoint = broker.remote.endpoint(vhost, name)
            if endpoint is not None:
                stats = await endpoint.stats()
                return QueueFigures(stats.messages, stats.consumers, stats.first_offset,
                                    stats.end_offset)
        except BrokerError:
            pass  # its leader is down or unreachable: what this node holds, if anything
    return _unknown(broker, vhost, name)


async def queue_range(broker: Broker, vhost: str, name: str) -> tuple[int, int] | None:
    """(first offset, end offset) of the queue as seen from this node."""
    shell = broker.queue(vhost, name)
    if shell is not None:
        return shell.log_start_offset, shell.readable_end
    figures = await remote_figures(broker, vhost, name)
    if figures.first_offset is None or figures.next_offset is None:
        return None
    return figures.first_offset, figures.next_offset
