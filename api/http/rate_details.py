"""RabbitMQ's `<name>_details` objects and the query parameters that ask for history.

Every counter or length in an answer has `<name>_details: {"rate": r}`. With
`msg_rates_age=S&msg_rates_incr=I` (message counters), `lengths_age` /
`lengths_incr` (queue lengths) or `data_rates_age` / `data_rates_incr` (bytes
of a connection), the matching details also have `samples` (the value at each
multiple of I seconds over the last S seconds, newest first), `avg` and
`avg_rate`, as RabbitMQ's management API gives them. The broker keeps
`KEEP_SAMPLES` samples per object, so an age beyond that window gives only
the samples it has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import Depends, Query

from api.http.http_errors import ApiError
from logbroker.rate_samples import (
    MAX_GRID_POINTS,
    Point,
    RateSampler,
    rate_details,
    sample_grid,
)

MAX_AGE_S = 24 * 3600


@dataclass(frozen=True, slots=True)
class SeriesAsk:
    """One `<kind>_age` / `<kind>_incr` pair: how far back, and how far apart."""

    age_s: int
    incr_s: int

    def grid(self, now_ms: int) -> list[int]:
        return sample_grid(now_ms, self.age_s, self.incr_s)


@dataclass(frozen=True, slots=True)
class RateQuery:
    """The history an answer should carry (None: rates only)."""

    msg_rates: SeriesAsk | None = None
    lengths: SeriesAsk | None = None
    data_rates: SeriesAsk | None = None

    def grid(self, now_ms: int) -> list[int]:
        """Every timestamp any of the asked series needs, newest first (one sampler
        lookup serves them all)."""
        stamps = {t for ask in (self.msg_rates, self.lengths, self.data_rates)
                  if ask is not None for t in ask.grid(now_ms)}
        return sorted(stamps, reverse=True)


def _pair(kind: str, age: int | None, incr: int | None) -> SeriesAsk | None:
    if age is None and incr is None:
        return None
    if age is None or incr is None:
        missing = f"{kind}_age" if age is None else f"{kind}_incr"
        raise ApiError(400, f"'{missing}' is missing: '{kind}_age' and '{kind}_incr' go "
                            "together", missing)
    if incr <= 0:
        raise ApiError(400, f"'{kind}_incr' must be a positive number of seconds",
                       f"{kind}_incr")
    if age < 0 or age > MAX_AGE_S:
        raise ApiError(400, f"'{kind}_age' must be 0 to {MAX_AGE_S} seconds", f"{kind}_age")
    if age // incr + 1 > MAX_GRID_POINTS:
        raise ApiError(400, f"'{kind}_age' / '{kind}_incr' asks for more than "
                            f"{MAX_GRID_POINTS} samples", f"{kind}_incr")
    return SeriesAsk(age, incr)


def rate_query(msg_rates_age: int | None = Query(None, description="seconds of history"),
               msg_rates_incr: int | None = Query(None, description="seconds per sample"),
               lengths_age: int | None = Query(None, description="seconds of history"),
               lengths_incr: int | None = Query(None, description="seconds per sample"),
               data_rates_age: int | None = Query(None, description="seconds of history"),
               data_rates_incr: int | None = Query(None, description="seconds per sample"),
               ) -> RateQuery:
    """Route dependency: RabbitMQ's history parameters, checked."""
    return RateQuery(_pair("msg_rates", msg_rates_age, msg_rates_incr),
                     _pair("lengths", lengths_age, lengths_incr),
                     _pair("data_rates", data_rates_age, data_rates_incr))


Rates = Depends(rate_query)


def details(name: str, rate: float, points: Sequence[Point], ask: SeriesAsk | None,
            now_ms: int) -> dict[str, Any]:
    """`<name>_details` for counter `name` of `points` (sampled at the union grid)."""
    view: dict[str, Any] = {"rate": rate}
    if ask is not None:
        wanted = set(ask.grid(now_ms))
        view.update(rate_details([p for p in points if p[0] in wanted], name))
    return view


def counted(out: dict[str, Any], names: Sequence[str], values: Mapping[str, int],
            rates: Mapping[str, float], points: Sequence[Point], ask: SeriesAsk | None,
            now_ms: int) -> None:
    """Add `<name>` and `<name>_details` to `out` for each of `names`."""
    for name in names:
        out[name] = values.get(name, 0)
        out[f"{name}_details"] = details(name, rates.get(name, 0.0), points, ask, now_ms)


def sampled(out: dict[str, Any], names: Sequence[str], values: Mapping[str, int],
            sampler: RateSampler, key: str, ask: SeriesAsk | None, now_ms: int) -> None:
    """`counted`, with the rates and the asked samples of `key` in `sampler` (an object
    of this node: a connection, a channel, an exchange)."""
    points = sampler.values_at(key, ask.grid(now_ms)) if ask is not None else []
    counted(out, names, values, sampler.rates(key), points, ask, now_ms)
