"""Reading from the broker for the source: the queues' bounds and starting points (on the
driver) and one slice of a queue as Arrow batches (in a Spark task)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from api.client.errors import ConnectionFailed
from connectors.spark.broker_http import BrokerHttp
from connectors.spark.offsets import Bounds, DataLoss, Offsets, start_offsets
from connectors.spark.partition_planning import QueueSlice
from connectors.spark.record_columns import records_batch
from connectors.spark.source_options import Connection, SourceOptions

logger = logging.getLogger("connectors.spark")
PAGE_MESSAGES = 100_000  # the broker's most per page
PAGE_BYTES = 8 << 20
RowsOfPage = Callable[[str, Sequence[Mapping[str, Any]]], Any]


class DataLossError(RuntimeError):
    pass


@dataclass(frozen=True)
class QueueStats:
    bounds: dict[str, Bounds]
    average_record_bytes: float


def queue_stats(http: BrokerHttp, queues: tuple[str, ...]) -> QueueStats:
    bounds: dict[str, Bounds] = {}
    log_bytes = records = 0
    for queue in queues:
        view = http.queue_view(queue)
        bounds[queue] = Bounds(int(view.get("first_offset", 0)), int(view.get("next_offset", 0)))
        log_bytes += int(view.get("log_bytes") or 0)
        records += bounds[queue].next - bounds[queue].first
    return QueueStats(bounds, log_bytes / records if records else 1024.0)


def timestamp_offsets(http: BrokerHttp, queues: tuple[str, ...], timestamp_ms: int
                      ) -> Offsets:
    """Per queue, the first offset at or after `timestamp_ms` (the log end if none)."""
    out: Offsets = {}
    for queue in queues:
        page = http.replay(queue, None, from_timestamp=timestamp_ms, max_messages=1,
                           max_bytes=1)
        messages = page["messages"]
        out[queue] = int(messages[0]["offset"]) if messages else int(page["next_offset"])
    return out


def group_offsets(http: BrokerHttp, group: str) -> Offsets:
    """A consumer group's committed offsets (empty for a group the broker does not know)."""
    view = http.group(group)
    if view is None:
        return {}
    return {str(item["queue"]): int(item["committed_offset"]) for item in view.get("queues", [])
            if item.get("committed_offset") is not None}


def initial_offsets(http: BrokerHttp, options: SourceOptions) -> Offsets:
    bounds = queue_stats(http, options.queues).bounds
    resolved: Offsets | None = None
    if options.start.mode == "timestamp":
        assert options.start.timestamp_ms is not None
        resolved = timestamp_offsets(http, options.queues, options.start.timestamp_ms)
    elif options.start.mode == "group":
        assert options.consumer_group is not None
        resolved = group_offsets(http, options.consumer_group)
    return start_offsets(options.start, options.queues, bounds, resolved)


def read_slice(connection: Connection, piece: QueueSlice, fail_on_data_loss: bool,
               rows: RowsOfPage = records_batch) -> Iterator[Any]:
    """The records of [start, end) of one queue: `rows` of each replay page (an Arrow
    batch; the bench measures tuples with `records_tuples`)."""
    cursor = piece.start
    deadline: float | None = None
    with BrokerHttp(connection) as http:
        while cursor < piece.end:
            page = http.replay(piece.queue, cursor, piece.end, max_messages=PAGE_MESSAGES,
                               max_bytes=PAGE_BYTES)
            messages = page["messages"]
            first_kept = int(page["first_offset"])
            if first_kept > cursor:
                # Retention removed [cursor, first_kept) after the batch was planned.
                lost = DataLoss(piece.queue, cursor, first_kept)
                if fail_on_data_loss:
                    raise DataLossError(lost.message())
                logger.warning("logbroker source: %s; skipping ahead", lost.message())
            if messages:
                yield rows(piece.queue, messages)
                deadline = None
            next_offset = int(page["next_offset"])
            if next_offset <= cursor:
                # Nothing readable yet (a follower's high watermark behind the planned end):
                # wait for it, within the retry time.
                deadline = deadline or time.monotonic() + connection.retry_ms / 1000
                if time.monotonic() > deadline:
                    raise ConnectionFailed(
                        f"queue {piece.queue!r}: offsets {cursor}..{piece.end} did not become "
                        f"readable within brokerRetryMs={connection.retry_ms}")
                time.sleep(0.05)
            cursor = max(cursor, next_offset)


def describe_losses(losses: list[DataLoss]) -> str:
    return "; ".join(loss.message() for loss in losses)


def bounds_next(bounds: Mapping[str, Bounds]) -> Offsets:
    return {queue: bound.next for queue, bound in bounds.items()}
