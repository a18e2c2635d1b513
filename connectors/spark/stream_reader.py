"""The streaming source: offsets are the queues' log offsets, with admission control
(`maxOffsetsPerTrigger`, `maxBytesPerTrigger`) and Trigger.AvailableNow.

This object lives in one Python process on the driver for the whole query;
`read` runs in executors and only uses what the partition carries.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from connectors.spark.broker_http import BrokerHttp
from connectors.spark.offsets import (
    Offsets,
    admit,
    cap,
    data_losses,
    rows_for_bytes,
    skip_lost,
    with_new_queues,
)
from connectors.spark.partition_planning import QueueSlice, plan_slices
from connectors.spark.queue_reading import (
    DataLossError,
    bounds_next,
    describe_losses,
    initial_offsets,
    queue_stats,
    read_slice,
)
from connectors.spark.source_options import Connection, SourceOptions

logger = logging.getLogger("connectors.spark")


class SliceInput(InputPartition):
    """One slice of one queue, with what an executor needs to read it."""

    def __init__(self, piece: QueueSlice, connection: Connection, fail_on_data_loss: bool
                 ) -> None:
        super().__init__(piece)
        self.piece = piece
        self.connection = connection
        self.fail_on_data_loss = fail_on_data_loss


def slice_inputs(start: Offsets, end: Offsets, options: SourceOptions, min_partitions: int
                 ) -> list[SliceInput]:
    return [SliceInput(piece, options.connection, options.fail_on_data_loss)
            for piece in plan_slices(start, end, options.rows_per_partition, min_partitions)]


def read_input(partition: SliceInput) -> Iterator[pa.RecordBatch]:
    return read_slice(partition.connection, partition.piece, partition.fail_on_data_loss)


class LogbrokerStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, default_parallelism: int = 2) -> None:
        self.options = options
        self.min_partitions = max(options.min_partitions, default_parallelism)
        self._http: BrokerHttp | None = None
        self._available_now: Offsets | None = None

    @property
    def http(self) -> BrokerHttp:
        if self._http is None:
            self._http = BrokerHttp(self.options.connection)
        return self._http

    def initialOffset(self) -> Offsets:
        # Used by Spark for a new query only; a restarted one resumes from its checkpoint.
        return initial_offsets(self.http, self.options)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.options.max_bytes_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        stats = queue_stats(self.http, self.options.queues)
        begin = with_new_queues(start, self.options.queues, stats.bounds)
        losses = data_losses(begin, stats.bounds)
        if losses:
            if self.options.fail_on_data_loss:
                raise DataLossError(describe_losses(losses))
            logger.warning("logbroker source: %s; skipping ahead", describe_losses(losses))
            begin = skip_lost(begin, stats.bounds)
        latest = cap(bounds_next(stats.bounds), self._available_now)
        max_rows: int | None = None
        if isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
            # Spark passes one limit; the byte limit of the options applies as well.
            if self.options.max_bytes_per_trigger is not None:
                max_rows = min(max_rows, rows_for_bytes(self.options.max_bytes_per_trigger,
                                                        stats.average_record_bytes))
        elif isinstance(limit, ReadMaxBytes):
            max_rows = rows_for_bytes(limit.max_bytes, stats.average_record_bytes)
        return admit(begin, latest, max_rows)

    def reportLatestOffset(self) -> Offsets:
        return bounds_next(queue_stats(self.http, self.options.queues).bounds)

    def prepareForTriggerAvailableNow(self) -> None:
        # The query ends once it reaches what the queues hold now.
        self._available_now = bounds_next(queue_stats(self.http, self.options.queues).bounds)

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[SliceInput]:
        return slice_inputs(start, end, self.options, self.min_partitions)

    def read(self, partition: SliceInput) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return read_input(partition)

    def commit(self, end: Offsets) -> None:
        if self.options.consumer_group is not None:
            self.http.commit_group(self.options.consumer_group, end)

    def stop(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None
