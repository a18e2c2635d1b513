"""`FollowerView`: a follower replica's copy of a queue, as a `ReplayView`.

A follower holds the leader's batches at the same offsets (`FollowerReplica`),
and hears the high watermark with every fetch answer. Records below that
watermark are held by every in-sync replica, so no failover can take them
back; the ones above it may still be cut (a divergent tail). The view shows
[log start, min(high watermark, log end)) and nothing past it. It lags the
leader by at most one fetch answer (a long poll, answered as soon as the
watermark moves), which is the price of reading from a follower.

The view is made fresh for each request and reads synchronously: the fetch
loop's appends and cuts happen between requests on the same event loop, never
in the middle of a page. (The copy's fsync runs on a thread but writes nothing
a reader sees.)
"""

from __future__ import annotations

from replication.queue.follower_replica import FollowerReplica
from segments.record_batch import LogRecord, RecordBatch


class FollowerView:
    def __init__(self, replica: FollowerReplica, high_watermark: int) -> None:
        self._replica = replica
        self._high_watermark = high_watermark

    @property
    def log_start_offset(self) -> int:
        return self._replica.log.log_start_offset

    @property
    def readable_end(self) -> int:
        log = self._replica.log
        return max(log.log_start_offset, min(self._high_watermark, log.next_offset))

    def read_log(self, offset: int, max_bytes: int) -> list[LogRecord]:
        offset = max(offset, self.log_start_offset)
        end = self.readable_end
        if offset >= end:
            return []
        return [r for r in self._replica.log.read(offset, max_bytes) if r.offset < end]

    def read_batches(self, offset: int, max_bytes: int) -> list[RecordBatch]:
        return self._replica.log.read_batches(offset, max_bytes)

    def offset_for_timestamp(self, timestamp_ms: int) -> int:
        return self._replica.log.offset_for_timestamp(timestamp_ms)
