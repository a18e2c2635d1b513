"""The sink, exactly once and atomic per micro-batch, on the broker's transactional batch
publish (producer id + seq).

Each task stages its rows as immutable parts of batch `seq` and returns its part
tokens; the driver's commit lists every task's tokens, and the broker publishes
exactly those at once, or nothing new when `seq` was committed before (a batch
Spark re-runs after a restart). Parts of failed task attempts are not listed and
are discarded by the commit. A part the broker lost (409) fails the commit, so
the query stops and, restarted, re-runs the batch from its checkpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from api.client.errors import ResourceLocked
from connectors.spark.broker_http import BrokerHttp
from connectors.spark.outgoing_rows import ColumnKinds, batch_messages, parts
from connectors.spark.sink_options import SinkOptions

logger = logging.getLogger("connectors.spark")
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # set by Spark's MicroBatchExecution on each task


@dataclass
class StagedParts(WriterCommitMessage):
    parts: list[str] = field(default_factory=list)
    rows: int = 0


def stage(options: SinkOptions, producer: str, seq: int, batches: Iterator[pa.RecordBatch]
          ) -> StagedParts:
    staged = StagedParts()

    def messages() -> Iterator[dict[str, object]]:
        for batch in batches:
            yield from batch_messages(batch, options.routing_key)

    with BrokerHttp(options.connection) as http:
        for group in parts(messages(), options.messages_per_part, options.bytes_per_part):
            try:
                staged.parts.append(http.stage_part(producer, seq, options.exchange, group))
            except ResourceLocked:
                # The broker refuses to stage into a committed batch: Spark is re-running a
                # batch whose commit reached the broker before the query stopped. Its rows
                # are published already; the driver's commit will find nothing to add.
                if committed_before(http, producer, seq):
                    return StagedParts([], 0)
                raise
            staged.rows += len(group)
    return staged


def committed_before(http: BrokerHttp, producer: str, seq: int) -> bool:
    view = http.producer(producer)
    if view is None:
        return False
    last = view.get("last_committed_seq")
    return seq in (view.get("committed_seqs") or []) or (last is not None and seq < int(last))


def commit(options: SinkOptions, producer: str, seq: int,
           messages: list[WriterCommitMessage | None]) -> None:
    tokens = [token for message in messages if isinstance(message, StagedParts)
              for token in message.parts]
    if not tokens:
        return  # nothing to publish (the broker would refuse an empty commit)
    with BrokerHttp(options.connection) as http:
        answer = http.commit_batch(producer, seq, tokens)
    if answer.get("duplicate"):
        logger.info("logbroker sink: batch %d of producer %s was committed before; "
                    "nothing published again", seq, producer)


def abort(options: SinkOptions, producer: str, seq: int) -> None:
    try:
        with BrokerHttp(options.connection) as http:
            http.abort_batch(producer, seq)
    except Exception as error:  # the staged parts expire on the broker anyway
        logger.warning("logbroker sink: aborting batch %d of %s failed: %s", seq, producer,
                       error)


def task_batch_id() -> int:
    """The micro-batch a streaming write task belongs to: `write` is not told it, but
    Spark sets it as a local property of every task of the batch."""
    from pyspark import TaskContext
    context = TaskContext.get()
    value = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
    if value is None:
        raise RuntimeError("logbroker sink: the task does not know its micro-batch id "
                           f"(no local property {BATCH_ID_PROPERTY!r})")
    return int(value)


class LogbrokerStreamWriter(DataSourceStreamArrowWriter):
    """seq = Spark's batchId; producer = the sink id (stable across restarts)."""

    def __init__(self, options: SinkOptions, producer: str, kinds: ColumnKinds) -> None:
        self.options = options
        self.producer = producer
        self.kinds = kinds

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedParts:
        return stage(self.options, self.producer, task_batch_id(), iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        commit(self.options, self.producer, batchId, messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        abort(self.options, self.producer, batchId)


class LogbrokerBatchWriter(DataSourceArrowWriter):
    """One `df.write`: one batch `seq` of the producer, committed once."""

    def __init__(self, options: SinkOptions, producer: str, seq: int, kinds: ColumnKinds
                 ) -> None:
        self.options = options
        self.producer = producer
        self.seq = seq
        self.kinds = kinds

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedParts:
        return stage(self.options, self.producer, self.seq, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        commit(self.options, self.producer, self.seq, messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        abort(self.options, self.producer, self.seq)


def next_batch_seq(options: SinkOptions, producer: str) -> int:
    """A batch write's seq: `batchId` when given, else one past the producer's last."""
    if options.batch_id is not None:
        return options.batch_id
    with BrokerHttp(options.connection) as http:
        view = http.producer(producer)
    last = None if view is None else view.get("last_committed_seq")
    return 0 if last is None else int(last) + 1
