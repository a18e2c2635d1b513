"""`LogbrokerDataSource`: the format `logbroker` (streaming and batch source, sink)."""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from connectors.spark.batch_reader import LogbrokerBatchReader
from connectors.spark.outgoing_rows import check_columns
from connectors.spark.schema import SOURCE_DDL
from connectors.spark.sink_options import (
    batch_producer_id,
    parse_sink_options,
    streaming_producer_id,
)
from connectors.spark.sink_writers import (
    LogbrokerBatchWriter,
    LogbrokerStreamWriter,
    next_batch_seq,
)
from connectors.spark.source_options import parse_source_options
from connectors.spark.stream_reader import LogbrokerStreamReader


def _parallelism() -> int:
    """The driver's default parallelism: at least one input partition per core."""
    try:
        from pyspark import SparkContext
        context = SparkContext._active_spark_context
        return int(context.defaultParallelism) if context is not None else 2
    except Exception:  # the data source's driver-side Python process has no SparkContext
        return 2


class LogbrokerDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "logbroker"

    def schema(self) -> str:
        return SOURCE_DDL

    def _options(self) -> dict[str, str]:
        return {str(key): str(value) for key, value in dict(self.options).items()}

    def reader(self, schema: StructType) -> LogbrokerBatchReader:
        options = parse_source_options(self._options(), batch=True)
        return LogbrokerBatchReader(options, _parallelism())

    def streamReader(self, schema: StructType) -> LogbrokerStreamReader:
        options = parse_source_options(self._options())
        return LogbrokerStreamReader(options, _parallelism())

    def writer(self, schema: StructType, overwrite: bool) -> LogbrokerBatchWriter:
        kinds = check_columns(_columns(schema))
        options = parse_sink_options(self._options())
        producer = batch_producer_id(options)
        return LogbrokerBatchWriter(options, producer, next_batch_seq(options, producer), kinds)

    def streamWriter(self, schema: StructType, overwrite: bool) -> LogbrokerStreamWriter:
        kinds = check_columns(_columns(schema))
        options = parse_sink_options(self._options())
        return LogbrokerStreamWriter(options, streaming_producer_id(options), kinds)


def _columns(schema: Any) -> list[tuple[str, str]]:
    return [(field.name, field.dataType.simpleString()) for field in schema.fields]
