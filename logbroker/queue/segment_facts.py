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

from logbroker.message import Message
from logbroker.queue.message_meta import NO_EXPIRY, MetaColumns
from segments.log import Log
from segments.record_batch import PREFIX, Headers, RecordBatch
from segments.record_columns import ColumnSummary

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
    # The CRC of the last batch added: with the segment's base, end and size, what says
    # a sidecar is this segment's and not one a replica cut back and wrote again.
    last_batch_crc: int = 0

    def __len__(self) -> int:
        return len(self.sizes)

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.sizes)

    def add_batches(self, batches: Iterable[RecordBatch], end_offset: int) -> None:
        """Append the facts of the records of `batches` from `next_offset` up to
        `end_offset` (the first batch may start before, the last end after)."""
        for batch in batches:
            if batch.next_offset <= self.next_offset:
                continue
            if batch.base_offset >= end_offset:
                break
            if batch.base_offset > self.next_offset:
                raise ValueError(f"batch {batch.base_offset} does not follow "
                                 f"{self.next_offset}")
            start = self.next_offset - batch.base_offset
            end = min(end_offset, batch.next_offset) - batch.base_offset
            if end > start:
                self._add_summary(batch.column_summary(), batch.first_timestamp_ms, start, end)
                self.last_batch_crc = batch_crc(batch)

    def _add_summary(self, summary: ColumnSummary, first_timestamp_ms: int, start: int,
                     end: int) -> None:
        count = end - start
        timestamps = (summary.timestamps[start:end] if summary.timestamps is not None
                      else array("q", [first_timestamp_ms]) * count)
        headers = summary.headers[start:end]
        if headers.count(headers[0]) == count:
            # The usual batch: one publisher's messages, equal properties. Column
            # operations only, no loop over its records.
            self._add_run(summary.value_lengths[start:end], timestamps,
                          [_facts_of(headers[0])], uniform=True)
            return
        known: dict[int, tuple[int, int, bool]] = {}
        facts = []
        for record_headers in headers:  # each distinct tuple is decoded once a batch
            found = known.get(id(record_headers))
            if found is None:
                found = known[id(record_headers)] = _facts_of(record_headers)
            facts.append(found)
        self._add_run(summary.value_lengths[start:end], timestamps, facts, uniform=False)

    def _add_run(self, sizes: array[int], timestamps: array[int],
                 facts: list[tuple[int, int, bool]], uniform: bool) -> None:
        first = len(self.sizes)
        count = len(sizes)
        expirations = [expiration for _, expiration, _ in facts] if not uniform \
            else [facts[0][1]]
        if self.expirations or any(e != NO_EXPIRATION for e in expirations):
            if not self.expirations:  # the first message with an expiration of its own
                self.expirations = array("q", [NO_EXPIRATION]) * first
            self.expirations.extend(array("q", expirations) * (count if uniform else 1))
        if uniform:
            priority, _, persistent = facts[0]
            self.priorities.extend(array("B", [priority]) * count)
            if not persistent:
                self.transient.extend(range(first, first + count))
        else:
            self.priorities.extend(array("B", [priority for priority, _, _ in facts]))
            self.transient.extend(first + index for index, (_, _, persistent)
                                  in enumerate(facts) if not persistent)
        self.sizes.extend(sizes)
        self.timestamps.extend(timestamps)

    def meta_columns(self, message_ttl_ms: int | None, start: int = 0,
                     end: int | None = None) -> MetaColumns:
        """The core's columns for the facts' `[start, end)` (relative), with expiries
        worked out under the queue's TTL now in force."""
        end = len(self) if end is None else end
        sizes, priorities = self.sizes[start:end], self.priorities[start:end]
        count = len(sizes)
        if not self.expirations:
            if message_ttl_ms is None:
                return MetaColumns(sizes, None, priorities)  # none expires
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


def batch_crc(batch: RecordBatch) -> int:
    return int(PREFIX.unpack_from(batch.data)[2])


def _facts_of(headers: Headers) -> tuple[int, int, bool]:
    """(priority, own expiration or NO_EXPIRATION, persistent) of a stored message."""
    properties = next((value for name, value in headers if name == "p"), None) or b""
    message = Message.stored("", "", b"", 0, properties)
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
