"""Offset arithmetic of the source, pure: where a query starts, how far a micro-batch may
go (admission control), and what retention took away.

An offset is a dict queue -> the next offset to read (exclusive end of what was
read), the JSON Spark writes to the checkpoint. Queue bounds come from the
broker as `Bounds(first, next)`: the first offset retention still keeps, and
the end of the log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from connectors.spark.source_options import EARLIEST, LATEST, StartSpec

Offsets = dict[str, int]


@dataclass(frozen=True)
class Bounds:
    first: int
    next: int


@dataclass(frozen=True)
class DataLoss:
    queue: str
    wanted: int
    first_kept: int

    def message(self) -> str:
        return (f"queue {self.queue!r}: offset {self.wanted} was removed by retention; the "
                f"first offset still kept is {self.first_kept} "
                f"({self.first_kept - self.wanted} messages lost). Set failOnDataLoss=false "
                f"to skip ahead to it")


def start_offsets(spec: StartSpec, queues: tuple[str, ...], bounds: Mapping[str, Bounds],
                  resolved: Mapping[str, int] | None = None) -> Offsets:
    """The initial offset of a new query. `resolved`: per-queue offsets found on the broker
    for the "timestamp" and "group" modes (a queue missing from a group starts earliest)."""
    out: Offsets = {}
    for queue in queues:
        bound = bounds[queue]
        if spec.mode == "earliest":
            out[queue] = bound.first
        elif spec.mode == "latest":
            out[queue] = bound.next
        elif spec.mode == "offsets":
            out[queue] = marker_offset(spec.offsets.get(queue, LATEST), bound)
        elif spec.mode in ("timestamp", "group"):
            found = (resolved or {}).get(queue)
            out[queue] = bound.first if found is None else min(max(found, 0), bound.next)
        else:
            raise ValueError(f"unknown start mode {spec.mode!r}")
    return out


def marker_offset(value: int, bound: Bounds) -> int:
    """Kafka's markers: -2 the earliest kept offset, -1 the end of the log; else `value`."""
    if value == EARLIEST:
        return bound.first
    if value == LATEST:
        return bound.next
    return value


def end_offsets(spec: StartSpec, queues: tuple[str, ...], bounds: Mapping[str, Bounds]
                ) -> Offsets:
    """A batch read's exclusive end: "latest" or per-queue offsets (capped at the log end)."""
    out: Offsets = {}
    for queue in queues:
        wanted = spec.offsets.get(queue, LATEST) if spec.mode == "offsets" else LATEST
        out[queue] = min(marker_offset(wanted, bounds[queue]), bounds[queue].next)
    return out


def with_new_queues(start: Mapping[str, int], queues: tuple[str, ...],
                    bounds: Mapping[str, Bounds]) -> Offsets:
    """A checkpointed offset plus queues added to the query since (read from their start)."""
    out = {queue: int(start[queue]) for queue in queues if queue in start}
    for queue in queues:
        if queue not in out:
            out[queue] = bounds[queue].first
    return out


def data_losses(start: Mapping[str, int], bounds: Mapping[str, Bounds]) -> list[DataLoss]:
    """Queues whose next offset retention already removed."""
    return [DataLoss(queue, offset, bounds[queue].first)
            for queue, offset in start.items()
            if queue in bounds and offset < bounds[queue].first]


def skip_lost(start: Mapping[str, int], bounds: Mapping[str, Bounds]) -> Offsets:
    """failOnDataLoss=false: move every queue past what retention removed."""
    return {queue: max(offset, bounds[queue].first) if queue in bounds else offset
            for queue, offset in start.items()}


def admit(start: Mapping[str, int], latest: Mapping[str, int], max_rows: int | None
          ) -> Offsets:
    """The end of the next micro-batch: `latest`, or at most `max_rows` offsets past `start`
    in total, shared among the queues in proportion to what each has waiting (as Spark's
    Kafka source does), every queue with data getting at least one offset so none starves.
    Never behind `start`."""
    available = {queue: max(0, latest.get(queue, offset) - offset)
                 for queue, offset in start.items()}
    total = sum(available.values())
    if max_rows is None or total <= max_rows:
        return {queue: start[queue] + available[queue] for queue in start}
    shares: dict[str, int] = {}
    for queue, waiting in available.items():
        share = waiting * max_rows // total
        shares[queue] = min(waiting, max(share, 1 if waiting else 0))
    # Rounding down leaves some of the budget unused; the minimum of 1 may overspend it.
    spare = max_rows - sum(shares.values())
    for queue in sorted(available, key=lambda q: available[q] - shares[q], reverse=True):
        if spare <= 0:
            break
        extra = min(spare, available[queue] - shares[queue])
        shares[queue] += extra
        spare -= extra
    while spare < 0:
        queue = max(shares, key=lambda q: shares[q])
        shares[queue] -= 1
        spare += 1
    return {queue: start[queue] + shares[queue] for queue in start}


def rows_for_bytes(max_bytes: int, average_record_bytes: float) -> int:
    """maxBytesPerTrigger as a count of offsets, from the queues' average record size (the
    broker tells a log's bytes and offsets, not each record's size before reading it)."""
    return max(1, int(max_bytes // max(1.0, average_record_bytes)))


def cap(offsets: Mapping[str, int], ceiling: Mapping[str, int] | None) -> Offsets:
    """Trigger.AvailableNow: never past the offsets recorded when the query began."""
    if ceiling is None:
        return dict(offsets)
    return {queue: min(offset, ceiling.get(queue, offset)) for queue, offset in offsets.items()}


def total_rows(start: Mapping[str, int], end: Mapping[str, int]) -> int:
    return sum(max(0, end.get(queue, offset) - offset) for queue, offset in start.items())
