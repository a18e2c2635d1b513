"""The simulated network: loss, duplication, random delays (hence reordering), cut links.

It carries anything that names its `source` and `target` node: Raft messages,
and in the queue simulation the replication, heartbeat and forwarding messages
that share the same links (a partition cuts them all).
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from replication.raft.messages import Message


class Addressed(Protocol):
    @property
    def source(self) -> str: ...

    @property
    def target(self) -> str: ...


M = TypeVar("M", bound=Addressed)


@dataclass
class Network(Generic[M]):
    rng: random.Random
    loss: float
    duplicate: float
    max_delay: int
    blocked: set[tuple[str, str]] = field(default_factory=set)
    stats: Counter[str] = field(default_factory=Counter)
    _queue: list[tuple[int, int, M]] = field(default_factory=list)
    _seq: int = 0

    def partition(self, rng: random.Random, ids: list[str]) -> str:
        """Cut `ids` (shuffled with `rng`) in two sides, both ways or (a quarter of the
        time) one way only; returns how, for the trace."""
        rng.shuffle(ids)
        cut = rng.randint(1, len(ids) - 1)
        side_a, side_b = ids[:cut], ids[cut:]
        one_way = rng.random() < 0.25
        for a in side_a:
            for b in side_b:
                self.blocked.add((a, b))
                if not one_way:
                    self.blocked.add((b, a))
        arrow = "-/>" if one_way else "</>"
        return f"partition {sorted(side_a)} {arrow} {sorted(side_b)}"

    def send(self, message: M, now: int, duplicable: bool = True) -> None:
        """Queue `message`; a non-`duplicable` one (a forwarded publish: TCP never
        delivers a frame twice) may still be lost, delayed and reordered."""
        self.stats["sent"] += 1
        if self.rng.random() < self.loss:
            self.stats["lost"] += 1
            return
        copies = 2 if self.rng.random() < self.duplicate and duplicable else 1
        self.stats["duplicated"] += copies - 1
        for _ in range(copies):
            self._seq += 1
            delay = self.rng.randint(1, self.max_delay)
            heapq.heappush(self._queue, (now + delay, self._seq, message))

    def due(self, now: int) -> list[M]:
        messages = []
        while self._queue and self._queue[0][0] <= now:
            message = heapq.heappop(self._queue)[2]
            if (message.source, message.target) in self.blocked:
                self.stats["cut"] += 1
            else:
                messages.append(message)
        self.rng.shuffle(messages)
        return messages


RaftNetwork = Network[Message]
