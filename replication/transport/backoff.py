"""Reconnect delays: exponential with jitter, bounded, reset by a success. Pure."""

from __future__ import annotations

import random


class Backoff:
    """Delay n (from 0) is uniform in [minimum, min(maximum, minimum * 2**n)].

    The jitter keeps two nodes that lost each other at the same moment from
    redialling in lock-step (which would make every reconnection a
    simultaneous dial); the randomness is injected so a seed replays it.
    """

    def __init__(self, minimum_s: float, maximum_s: float, rng: random.Random) -> None:
        if not 0 < minimum_s <= maximum_s:
            raise ValueError(
                f"need 0 < reconnect_min_s <= reconnect_max_s, got {minimum_s}, {maximum_s}"
            )
        self._minimum = minimum_s
        self._maximum = maximum_s
        self._rng = rng
        self._attempt = 0

    def next_delay(self) -> float:
        ceiling = min(self._maximum, self._minimum * 2.0 ** min(self._attempt, 60))
        self._attempt += 1
        return self._rng.uniform(self._minimum, ceiling)

    def reset(self) -> None:
        self._attempt = 0
