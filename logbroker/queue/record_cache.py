"""The records a queue is about to deliver, read ahead from its log in one go.

Consumers take messages in offset order, mostly: reading one record per
delivery would cost a log read each, so a read brings `READ_AHEAD_BYTES` of
records and the next deliveries come from them. Once every cached record is
settled the cache is dropped, so an idle queue holds no bodies in memory.
"""

from __future__ import annotations

from segments.log import Log
from segments.record_batch import LogRecord

READ_AHEAD_BYTES = 256 * 1024


class RecordCache:
    def __init__(self, log: Log) -> None:
        self._log = log
        self._records: dict[int, LogRecord] = {}
        self._last = -1

    def record_at(self, offset: int) -> LogRecord:
        record = self._records.get(offset)
        if record is None:
            records = self._log.read(offset, READ_AHEAD_BYTES)
            self._records = {r.offset: r for r in records}
            self._last = records[-1].offset
            record = self._records[offset]
        return record

    def settled_below(self, ack_floor: int) -> None:
        if self._records and ack_floor > self._last:
            self._records = {}
