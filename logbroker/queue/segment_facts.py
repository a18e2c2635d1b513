"""What a restart needs to know about the messages of a stretch of the log.

A queue's core keeps, per message, its size, priority and expiry
(message_meta.py), and a restart of a single-node queue drops the
non-persistent ones. All of it follows from a record's body length, its
timestamp and its stored AMQP properties; `SegmentFacts` keeps those facts
column by column for consecutive offsets, so that a sealed segment's can be
written once next to it (meta_sidecar.py) and read back with
`array.frombytes` instead of decoding every message again.

Expiry is kept as its two inputs (the record's timestamp and the message's
own `expiration`), not as a deadline: the queue's `x-message-ttl` may have
changed by the time the facts are read, and the deadline is computed with
the TTL in force then, as a restart without them would (`expiry_from`).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

from logbroker.message import Message, stored_fields
from logbroker.queue.message_meta import NO_EXPIRY, MetaColumns
from segments.log import Log
from segments.record_batch import LogRecord, RecordBatch

NO_EXPIRATION = -1  # in `expirations`: the message has no (valid) expiration of its own


@dataclass(slots=True)
class SegmentFacts:
    """The facts of the messages at `[base_offset, base_offset + len(self))`."""

    base_offset: int
    sizes: array[int] = field(default_factory=lambda: array("I"))  # body bytes
    priorities: array[int] = field(default_factory=lambda: array("B"))  # 0-255
    timestamps: array[int] = field(default_factory=lambda: array("q"))  # record's, ms
    # The message's own TTL in ms, or NO_EXPIRATION; empty when no message has one.
    expirations: array[int] = field(default_factory=lambda: array("q"))
    transient: array[int] = field(default_factory=lambda: array("I"))  # relative offsets

    def __len__(self) -> int:
        return len(self.sizes)

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.sizes)

    def add_records(self, records: Iterable[LogRecord]) -> None:
        """Append the facts of `records`, which continue these facts' offsets."""
        # Records of one batch mostly share one headers tuple (exchange, routing key,
        # properties), decoded once per batch: work out each distinct one once.
        known: dict[int, tuple[int, int, bool]] = {}
        for record in records:
            if record.offset != self.next_offset:
                raise ValueError(f"record {record.offset} does not follow {self.next_offset}")
            facts = known.get(id(record.headers))
            if facts is None:
                facts = known[id(record.headers)] = _facts_of(record)
            priority, expiration, persistent = facts
            if expiration != NO_EXPIRATION and not self.expirations:
                self.expirations = array("q", [NO_EXPIRATION]) * len(self.sizes)
            if self.expirations:
                self.expirations.append(expiration)
            if not persistent:
                self.transient.append(len(self.sizes))
            self.sizes.append(len(record.value))
            self.priorities.append(priority)
            self.timestamps.append(record.timestamp_ms)

    def add_batches(self, batches: Iterable[RecordBatch], end_offset: int) -> None:
        """Append the facts of the records of `batches` from `next_offset` up to
        `end_offset` (the first batch may start before, the last end after)."""
        for batch in batches:
            if batch.next_offset <= self.next_offset:
                continue
            records = batch.records()
            start = self.next_offset - batch.base_offset
            self.add_records(records[max(start, 0):end_offset - batch.base_offset])

    def meta_columns(self, message_ttl_ms: int | None, start: int = 0,
                     end: int | None = None) -> MetaColumns:
        """The core's columns for the facts' `[start, end)` (relative), with expiries
        worked out under the queue's TTL now in force."""
        end = len(self) if end is None else end
        sizes, priorities = self.sizes[start:end], self.priorities[start:end]
        count = len(sizes)
        if not self.expirations:
            if message_ttl_ms is None:
                expiries = array("q", bytes(8 * count))
            else:
                expiries = array("q", map(message_ttl_ms.__add__, self.timestamps[start:end]))
            return MetaColumns(sizes, expiries, priorities)
        expiries = array("q", map(_expiry, self.timestamps[start:end],
                                  self.expirations[start:end], [message_ttl_ms] * count))
        return MetaColumns(sizes, expiries, priorities)

    def transient_ranges(self, start_offset: int) -> list[tuple[int, int]]:
        """The non-persistent messages at or past `start_offset`, as offset ranges."""
        ranges: list[tuple[int, int]] = []
        for relative in self.transient:
            offset = self.base_offset + relative
            if offset < start_offset:
                continue
            if ranges and ranges[-1][1] == offset:
                ranges[-1] = (ranges[-1][0], offset + 1)
            else:
                ranges.append((offset, offset + 1))
        return ranges


def _facts_of(record: LogRecord) -> tuple[int, int, bool]:
    """(priority, own expiration or NO_EXPIRATION, persistent) of a stored message."""
    message = Message.stored("", "", b"", 0, stored_fields(record)[2])
    expiration, priority = message.expiration_and_priority()
    return min(priority or 0, 255), _expiration_ms(expiration), message.persistent


def _expiration_ms(expiration: str | None) -> int:
    """As `expiry_from` reads the property: a malformed one means none."""
    if expiration is None or expiration == "":
        return NO_EXPIRATION
    try:
        return max(0, int(expiration))
    except ValueError:
        return NO_EXPIRATION


def _expiry(timestamp_ms: int, expiration: int, message_ttl_ms: int | None) -> int:
    """`expiry_from` over the stored facts (NO_EXPIRY: never)."""
    deadlines = []
    if message_ttl_ms is not None:
        deadlines.append(timestamp_ms + message_ttl_ms)
    if expiration != NO_EXPIRATION:
        deadlines.append(timestamp_ms + expiration)
    return min(deadlines) if deadlines else NO_EXPIRY


def scanned_facts(log: Log, start_offset: int, end_offset: int,
                  chunk_bytes: int = 1 << 20) -> SegmentFacts:
    """The facts of `[start_offset, end_offset)`, read from the log itself (the active
    segment, or a sealed one whose sidecar is missing or bad)."""
    facts = SegmentFacts(start_offset)
    while facts.next_offset < end_offset:
        batches = log.read_batches(facts.next_offset, chunk_bytes)
        if not batches:
            raise ValueError(f"the log ends at {facts.next_offset}, before {end_offset}")
        facts.add_batches(batches, end_offset)
    return facts
