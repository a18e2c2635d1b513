"""Message rates and their history, RabbitMQ style: counters sampled every few seconds.

Theory of operation. A timer calls `RateSampler.sample` every `SAMPLE_INTERVAL_S`
with the clock and the counters (and lengths) of every object it tracks, each
under a key (a queue, the node, a connection). Each key keeps a ring of its
last `keep` samples in flat integer arrays, grown as needed; a round whose
values equal the last sample stores nothing (the last sample stands until the
values change), so an idle object costs one sample; a key absent from a round
is forgotten, so an object that vanished costs nothing. `rates` is the growth
of each counter over the last `window` sampling intervals (from the value then
to the value at the object's last round) divided by that time.
`values_at` answers RabbitMQ's `msg_rates_age` / `msg_rates_incr` questions:
the value each counter had at each timestamp of a grid, which
`rate_details` turns into `samples` (newest first), `avg` and `avg_rate`.
Grids are multiples of the increment, so the series of several objects, or of
several nodes, add up timestamp by timestamp.

Invariants: a key holds at most `keep` samples of a fixed set of counter
names (a new set of names starts its history again); timestamps in a ring
only grow, and no two consecutive samples are equal. Pure: time comes in as
`now_ms`.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence

SAMPLE_INTERVAL_S = 5.0
WINDOW_SAMPLES = 13  # one minute of 5 s samples: the window RabbitMQ's UI shows by default
KEEP_SAMPLES = 121  # ten minutes of 5 s samples, per object
MAX_GRID_POINTS = 1000  # timestamps one age/increment question may ask for

Counters = Mapping[str, int]
Point = tuple[int, dict[str, int]]  # (timestamp ms, counter values at that time)


class _Ring:
    """The last `capacity` samples of one object, in flat arrays (no object per sample),
    grown as samples come: an object that never changes holds one."""

    __slots__ = ("_start", "_times", "_values", "capacity", "count", "names", "seen_ms")

    def __init__(self, names: tuple[str, ...], capacity: int) -> None:
        self.names = names
        self.capacity = capacity
        self._times = array("q")
        self._values = array("q")
        self._start = 0
        self.count = 0
        self.seen_ms = 0  # the last round that sampled it (a sample or unchanged)

    def append(self, now_ms: int, values: Counters) -> None:
        if self.count < self.capacity:
            self._times.append(now_ms)
            self._values.extend(values[name] for name in self.names)
            self.count += 1
            return
        slot, width = self._start, len(self.names)
        self._start = (self._start + 1) % self.capacity
        self._times[slot] = now_ms
        for index, name in enumerate(self.names):
            self._values[slot * width + index] = values[name]

    def unchanged(self, values: Counters) -> bool:
        slot, width = self._slot(-1), len(self.names)
        return all(self._values[slot * width + i] == values[name]
                   for i, name in enumerate(self.names))

    def time(self, index: int) -> int:
        """The timestamp of the `index`th sample, oldest first (-1: the newest)."""
        return self._times[self._slot(index)]

    def values(self, index: int) -> dict[str, int]:
        width = len(self.names)
        start = self._slot(index) * width
        return dict(zip(self.names, self._values[start:start + width], strict=True))

    def _slot(self, index: int) -> int:
        return (self._start + index % self.count) % self.count

    def latest_at(self, timestamp_ms: int) -> int | None:
        """Index of the newest sample taken at or before `timestamp_ms` (None: none)."""
        low, high = 0, self.count
        while low < high:  # the first sample after timestamp_ms
            middle = (low + high) // 2
            if self.time(middle) <= timestamp_ms:
                low = middle + 1
            else:
                high = middle
        return low - 1 if low else None


class RateSampler:
    def __init__(self, window: int = WINDOW_SAMPLES, keep: int = KEEP_SAMPLES) -> None:
        self._window_ms = int((window - 1) * SAMPLE_INTERVAL_S * 1000)
        self._keep = max(keep, window)
        self._rings: dict[str, _Ring] = {}

    def __len__(self) -> int:
        return len(self._rings)

    def held(self) -> int:
        """Samples kept over every object (memory is about 8 bytes per counter each)."""
        return sum(ring.count for ring in self._rings.values())

    def sample(self, now_ms: int, counters: Iterable[tuple[str, Counters]]) -> None:
        """One round: every object's values now (an unchanged object stores nothing); the
        objects left out are forgotten."""
        self.forget_all_but(self.record(now_ms, counters))

    def record(self, now_ms: int, counters: Iterable[tuple[str, Counters]]) -> set[str]:
        """Part of a round (a timer that yields between parts): returns the keys seen."""
        seen = set()
        for key, values in counters:
            seen.add(key)
            names = tuple(values)
            ring = self._rings.get(key)
            if ring is None or ring.names != names:
                ring = self._rings[key] = _Ring(names, self._keep)
            elif now_ms < ring.seen_ms:
                continue  # the wall clock stepped back: keep the history ordered
            elif ring.unchanged(values):
                ring.seen_ms = now_ms
                continue
            ring.append(now_ms, values)
            ring.seen_ms = now_ms
        return seen

    def forget_all_but(self, alive: set[str]) -> None:
        """The end of a round: objects it did not see are gone."""
        for gone in set(self._rings) - alive:
            del self._rings[gone]

    def rates(self, key: str) -> dict[str, float]:
        """Per-second growth of every counter of `key` over the window that ends at its
        last round (none until it was sampled twice)."""
        ring = self._rings.get(key)
        if ring is None or ring.seen_ms <= ring.time(0):
            return {}
        since = max(ring.seen_ms - self._window_ms, ring.time(0))
        first_index = ring.latest_at(since)
        assert first_index is not None  # since >= the first sample's time
        first, last = ring.values(first_index), ring.values(-1)
        elapsed_s = max((ring.seen_ms - since) / 1000, 1e-3)
        return {name: round((last[name] - first[name]) / elapsed_s, 2) for name in last}

    def values_at(self, key: str, grid: Sequence[int]) -> list[Point]:
        """The counters of `key` as they were at each timestamp of `grid` (newest first),
        leaving out the timestamps before its first sample. One walk back through the
        ring; points at the same sample share its (read-only) values."""
        ring = self._rings.get(key)
        if ring is None or not ring.count:
            return []
        points: list[Point] = []
        index, shown, values = ring.count - 1, -1, {}
        for timestamp in grid:
            while index >= 0 and ring.time(index) > timestamp:
                index -= 1
            if index < 0:
                break
            if index != shown:
                shown, values = index, ring.values(index)
            points.append((timestamp, values))
        return points


def sample_grid(now_ms: int, age_s: int, incr_s: int) -> list[int]:
    """RabbitMQ's sample timestamps for `age` and `incr`: multiples of the increment
    from `now_ms` back `age` seconds, newest first."""
    incr_ms = incr_s * 1000
    newest = now_ms - now_ms % incr_ms
    count = min(age_s // incr_s + 1, MAX_GRID_POINTS)
    return [newest - i * incr_ms for i in range(count)]


def sum_points(series: Iterable[Sequence[Point]]) -> list[Point]:
    """Several objects' points added timestamp by timestamp (newest first); a timestamp
    counts only the objects that have a point there."""
    total: dict[int, dict[str, int]] = {}
    for points in series:
        for timestamp, values in points:
            into = total.setdefault(timestamp, {})
            for name, value in values.items():
                into[name] = into.get(name, 0) + value
    return sorted(total.items(), key=lambda point: -point[0])


def rate_details(points: Sequence[Point], name: str) -> dict[str, object]:
    """RabbitMQ's `samples`, `avg` and `avg_rate` of counter `name` from `points` (newest
    first): avg is the mean of the samples, avg_rate the growth from the oldest to
    the newest over their time span."""
    samples = [{"sample": values.get(name, 0), "timestamp": timestamp}
               for timestamp, values in points]
    if not samples:
        return {"samples": [], "avg": 0.0, "avg_rate": 0.0}
    newest, oldest = samples[0], samples[-1]
    span_s = (newest["timestamp"] - oldest["timestamp"]) / 1000
    avg_rate = (newest["sample"] - oldest["sample"]) / span_s if span_s > 0 else 0.0
    return {"samples": samples, "avg": round(sum(s["sample"] for s in samples) / len(samples), 2),
            "avg_rate": round(avg_rate, 2)}
