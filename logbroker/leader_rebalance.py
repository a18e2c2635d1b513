"""Which replicated queues should change leader so every node leads about as many (pure).

`rabbitmq-queues rebalance` in our terms: while the node leading the most
queues leads at least two more than the node leading the fewest, move one of
its queues to the least loaded node that is an in-sync member of that queue
and up. Only in-sync members may lead (a handover waits for them to catch
up anyway, and out-of-sync promotion is failover's last resort, never a
rebalance). Deterministic: ties go by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MAX_MOVES = 10_000


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


def plan_rebalance(queues: Sequence[LedQueue], live_nodes: Iterable[str]) -> list[LeaderMove]:
    live = sorted(set(live_nodes))
    counts = {node: 0 for node in live}
    leaders = {(q.vhost, q.name): q.leader for q in queues}
    for queue in queues:
        if queue.leader in counts:
            counts[queue.leader] += 1
    moves: list[LeaderMove] = []
    by_key = {(q.vhost, q.name): q for q in queues}
    for _ in range(MAX_MOVES):
        move = _one_move(by_key, leaders, counts)
        if move is None:
            break
        moves.append(move)
        leaders[(move.vhost, move.name)] = move.target
        counts[move.source] -= 1
        counts[move.target] += 1
    return moves


def _one_move(by_key: dict[tuple[str, str], LedQueue], leaders: dict[tuple[str, str], str],
              counts: dict[str, int]) -> LeaderMove | None:
    for source in sorted(counts, key=lambda n: (-counts[n], n)):
        for key in sorted(k for k, leader in leaders.items() if leader == source):
            queue = by_key[key]
            targets = [n for n in queue.in_sync
                       if n in counts and n != source and counts[n] + 1 < counts[source]]
            if targets:
                target = min(targets, key=lambda n: (counts[n], n))
                return LeaderMove(queue.vhost, queue.name, source, target)
    return None
