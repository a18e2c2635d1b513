"""The batch source: `spark.read.format("logbroker")` over a fixed range of offsets."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader

from connectors.spark.broker_http import BrokerHttp
from connectors.spark.offsets import data_losses, end_offsets, skip_lost
from connectors.spark.queue_reading import (
    DataLossError,
    describe_losses,
    initial_offsets,
    queue_stats,
)
from connectors.spark.source_options import SourceOptions
from connectors.spark.stream_reader import SliceInput, read_input, slice_inputs

logger = logging.getLogger("connectors.spark")


class LogbrokerBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions, default_parallelism: int = 2) -> None:
        self.options = options
        self.min_partitions = max(options.min_partitions, default_parallelism)

    def partitions(self) -> Sequence[SliceInput]:
        assert self.options.ending is not None
        with BrokerHttp(self.options.connection) as http:
            start = initial_offsets(http, self.options)
            bounds = queue_stats(http, self.options.queues).bounds
        losses = data_losses(start, bounds)
        if losses:
            if self.options.fail_on_data_loss:
                raise DataLossError(describe_losses(losses))
            logger.warning("logbroker source: %s; skipping ahead", describe_losses(losses))
            start = skip_lost(start, bounds)
        end = end_offsets(self.options.ending, self.options.queues, bounds)
        return slice_inputs(start, end, self.options, self.min_partitions)

    def read(self, partition: SliceInput) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return read_input(partition)
