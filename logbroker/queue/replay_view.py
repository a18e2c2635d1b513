"""`ReplayView`: the narrow, read-only view of a queue's log that replay serves from.

Two things are one: the queue shell of the queue's leader, and an in-sync
follower's copy (`logbroker.cluster.follower_view`), so a replay may be
served by any in-sync replica (Kafka's fetch from follower). Both bound what
they show by what is committed: the leader shows what its consumers may see
(the high watermark, for a replicated queue); a follower shows its copy up
to the high watermark it last heard from the leader, never a record the
in-sync set has not acknowledged, so a failover cannot take back a record a
replay returned.
"""

from __future__ import annotations

from typing import Protocol

from segments.record_batch import LogRecord, RecordBatch


class ReplayView(Protocol):
    @property
    def log_start_offset(self) -> int:
        """The oldest offset retention keeps."""
        ...

    @property
    def readable_end(self) -> int:
        """One past the last record a reader may see here."""
        ...

    def read_log(self, offset: int, max_bytes: int) -> list[LogRecord]:
        """Records in [max(offset, log_start_offset), readable_end), about `max_bytes`."""
        ...

    def read_batches(self, offset: int, max_bytes: int) -> list[RecordBatch]:
        """The stored batches from the one holding `offset` (log_start_offset <= offset <
        readable_end); the last may run past `readable_end`, which the caller cuts."""
        ...

    def offset_for_timestamp(self, timestamp_ms: int) -> int:
        """The first offset whose record is at least as recent (else past the end)."""
        ...
