"""Message rates per queue, RabbitMQ style: counters sampled every few seconds.

`RateSampler.sample` is called by a timer with the clock and each queue's
counters; a rate is the counter's growth across the retained window of samples
divided by its duration. Pure apart from the caller's clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

SAMPLE_INTERVAL_S = 5.0
WINDOW_SAMPLES = 13  # one minute of 5 s samples: the window RabbitMQ's UI shows by default

Counters = dict[str, int]


class RateSampler:
    def __init__(self, window: int = WINDOW_SAMPLES) -> None:
        self._window = window
        self._samples: dict[str, deque[tuple[int, Counters]]] = {}

    def sample(self, now_ms: int, counters: Iterable[tuple[str, Counters]]) -> None:
        alive = set()
        for key, values in counters:
            alive.add(key)
            history = self._samples.setdefault(key, deque(maxlen=self._window))
            history.append((now_ms, dict(values)))
        for gone in set(self._samples) - alive:
            del self._samples[gone]

    def rates(self, key: str) -> dict[str, float]:
        """Per-second rate of every counter of `key` (0.0 until two samples exist)."""
        history = self._samples.get(key)
        if not history or len(history) < 2:
            return {}
        (first_ms, first), (last_ms, last) = history[0], history[-1]
        elapsed_s = max((last_ms - first_ms) / 1000, 1e-3)
        return {name: round((last[name] - first.get(name, 0)) / elapsed_s, 2) for name in last}
