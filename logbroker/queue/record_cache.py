"""The records a queue is about to deliver, kept so a delivery need not read the log.

Two ways in. Consumers take messages in offset order, mostly: reading one
record per delivery would cost a log read each, so a miss reads
`READ_AHEAD_BYTES` of records in one go and the next deliveries come from
them. And a consumer that keeps up is handed each message right after it is
written, when a read-ahead would find only that one record: so records just
written are remembered (`wrote`) when they continue what the cache holds, and
the delivery takes them from memory instead of reading back what was just
written (a `pread` and a batch decode per message at low rates).

Invariants: the cache holds consecutive offsets `[first, next)` and at most
`CACHE_BYTES_MAX` of values beyond one read-ahead; settled records leave it
(`settled_below`), so an idle queue holds no bodies in memory.
"""

from __future__ import annotations

from collections.abc import Sequence

from segments.log import Log
from segments.record_batch import LogRecord, Record

READ_AHEAD_BYTES = 256 * 1024
CACHE_BYTES_MAX = 2 * READ_AHEAD_BYTES  # remembered writes stop here


class RecordCache:
    def __init__(self, log: Log) -> None:
        self._log = log
        self._records: dict[int, LogRecord | Record] = {}
        self._first = self._next = 0  # the cached offsets are [first, next)
        self._bytes = 0

    def record_at(self, offset: int) -> LogRecord | Record:
        record = self._records.get(offset)
        if record is None:
            records = self._log.read(offset, READ_AHEAD_BYTES)
            self._records = {r.offset: r for r in records}
            self._first, self._next = offset, records[-1].offset + 1
            self._bytes = sum(len(r.value) for r in records)
            record = self._records[offset]
        return record

    def wrote(self, base_offset: int, records: Sequence[Record]) -> None:
        """`records` were just written at `base_offset` on: keep them if they continue
        the cache (or start it) and it has room."""
        if self._records and base_offset != self._next:
            return
        if not self._records:
            self._first = self._next = base_offset
        size = sum(len(r.value) for r in records)
        if self._bytes + size > CACHE_BYTES_MAX:
            return
        for index, record in enumerate(records):
            self._records[base_offset + index] = record
        self._next = base_offset + len(records)
        self._bytes += size

    def settled_below(self, ack_floor: int) -> None:
        if not self._records:
            return
        if ack_floor >= self._next:
            self._records, self._bytes = {}, 0
            return
        # Drop the settled head one by one: a live queue never settles all at once.
        while self._first < ack_floor:
            record = self._records.pop(self._first, None)
            if record is not None:
                self._bytes -= len(record.value)
            self._first += 1
