"""Which replicated queues should change leader so every node leads about as many (pure).

`rabbitmq-queues rebalance` in our terms: while the node leading the most
queues leads at least two more than the node leading the fewest, move one of
its queues to the least loaded node that is an in-sync member of that queue
and up. Only in-sync members may lead (a handover waits for them to catch
up anyway, and out-of-sync promotion is failover's last resort, never a
rebalance). Deterministic: ties go by name.

Hosts (issue 28: the workers of `serve --workers N` are nodes on one
host). Leaders are spread over hosts first, then over the workers of each
host. A host's fair share is proportional to its live workers (a worker is a
core), so the hosts are compared by leaders per live worker: a queue moves
from host S to host T while S would still lead at least as many per worker
as T after the move ((c_S - 1) * w_T >= (c_T + 1) * w_S), taken from S's
busiest worker and given to T's least busy in-sync worker. Then, within
each host, its workers are evened out by the rule above. When every node is
its own host (one worker each) the host pass is exactly the rule above and
the worker pass has nothing to do: the plan is the one without hosts.
Every move lowers the sum over hosts of c^2 / w (or, within a host, of c^2),
so the plan ends; `MAX_MOVES` bounds it anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

MAX_MOVES = 10_000
QueueKey = tuple[str, str]  # (vhost, name)


@dataclass(frozen=True, slots=True)
class LedQueue:
    vhost: str
    name: str
    leader: str
    in_sync: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LeaderMove:
    vhost: str
    name: str
    source: str
    target: str


class _Plan:
    """The leaders as the moves so far left them, and the counts per node and host."""

    def __init__(self, queues: Sequence[LedQueue], live: Sequence[str],
                 hosts: Mapping[str, str]) -> None:
        self.by_key = {(q.vhost, q.name): q for q in queues}
        self.leaders = {(q.vhost, q.name): q.leader for q in queues}
        self.host = {node: hosts.get(node) or node for node in live}
        self.counts = {node: 0 for node in live}
        self.workers: dict[str, int] = {}
        for node in live:
            self.workers[self.host[node]] = self.workers.get(self.host[node], 0) + 1
        self.host_counts = {host: 0 for host in self.workers}
        for queue in queues:
            if queue.leader in self.counts:
                self.counts[queue.leader] += 1
                self.host_counts[self.host[queue.leader]] += 1
        self.moves: list[LeaderMove] = []

    def load(self, host: str) -> Fraction:
        return Fraction(self.host_counts[host], self.workers[host])

    def led_by(self, node: str) -> list[QueueKey]:
        return sorted(key for key, leader in self.leaders.items() if leader == node)

    def apply(self, key: QueueKey, source: str, target: str) -> None:
        self.moves.append(LeaderMove(key[0], key[1], source, target))
        self.leaders[key] = target
        self.counts[source] -= 1
        self.counts[target] += 1
        self.host_counts[self.host[source]] -= 1
        self.host_counts[self.host[target]] += 1


def plan_rebalance(queues: Sequence[LedQueue], live_nodes: Iterable[str],
                   hosts: Mapping[str, str] | None = None) -> list[LeaderMove]:
    """`hosts`: node -> its host; a node not in it (or with "") is its own host."""
    plan = _Plan(queues, sorted(set(live_nodes)), hosts or {})
    for step in (_host_move, _worker_move):
        for _ in range(MAX_MOVES - len(plan.moves)):
            if not step(plan):
                break
    return plan.moves


def _host_move(plan: _Plan) -> bool:
    """One move from a busier host to a less busy one (module doc)."""
    def worth(source: str, target: str) -> bool:
        s, t = plan.host[source], plan.host[target]
        return s != t and (plan.host_counts[s] - 1) * plan.workers[t] >= \
            (plan.host_counts[t] + 1) * plan.workers[s]

    def target_rank(node: str) -> tuple[Fraction, int, str]:
        return (plan.load(plan.host[node]), plan.counts[node], node)

    sources = sorted(plan.counts, key=lambda n: (-plan.load(plan.host[n]), -plan.counts[n], n))
    return _first_move(plan, sources, worth, target_rank)


def _worker_move(plan: _Plan) -> bool:
    """One move between two workers of a host, two leaders apart or more."""
    def worth(source: str, target: str) -> bool:
        return plan.host[source] == plan.host[target] and \
            plan.counts[target] + 1 < plan.counts[source]

    sources = sorted(plan.counts, key=lambda n: (-plan.counts[n], n))
    return _first_move(plan, sources, worth, lambda n: (plan.counts[n], n))


def _first_move(plan: _Plan, sources: Sequence[str], worth: Callable[[str, str], bool],
                target_rank: Callable[[str], tuple[Any, ...]]) -> bool:
    for source in sources:
        for key in plan.led_by(source):
            targets = [n for n in plan.by_key[key].in_sync
                       if n in plan.counts and n != source and worth(source, n)]
            if targets:
                plan.apply(key, source, min(targets, key=target_rank))
                return True
    return False
