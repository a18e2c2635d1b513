"""The simulated network: loss, duplication, random delays (hence reordering), cut links."""

from __future__ import annotations

import heapq
import random
from collections import Counter
from dataclasses import dataclass, field

from replication.raft.messages import Message


@dataclass
class Network:
    rng: random.Random
    loss: float
    duplicate: float
    max_delay: int
    blocked: set[tuple[str, str]] = field(default_factory=set)
    stats: Counter[str] = field(default_factory=Counter)
    _queue: list[tuple[int, int, Message]] = field(default_factory=list)
    _seq: int = 0

    def send(self, message: Message, now: int) -> None:
        self.stats["sent"] += 1
        if self.rng.random() < self.loss:
            self.stats["lost"] += 1
            return
        copies = 2 if self.rng.random() < self.duplicate else 1
        self.stats["duplicated"] += copies - 1
        for _ in range(copies):
            self._seq += 1
            delay = self.rng.randint(1, self.max_delay)
            heapq.heappush(self._queue, (now + delay, self._seq, message))

    def due(self, now: int) -> list[Message]:
        messages = []
        while self._queue and self._queue[0][0] <= now:
            message = heapq.heappop(self._queue)[2]
            if (message.source, message.target) in self.blocked:
                self.stats["cut"] += 1
            else:
                messages.append(message)
        self.rng.shuffle(messages)
        return messages
