"""How far a queue's settled history is kept, so it can be replayed (Kafka-style retention).

A queue deletes a log segment only when every message in it is settled (acked,
dropped or dead-lettered) -- that is what a RabbitMQ user expects -- and, beyond
that, only when the retention policy lets it go: the newest record in the
segment is older than `retention_ms`, or the settled segments kept add up to
more than `retention_bytes` (oldest go first). Retention 0 deletes settled
segments at once; None means no limit of that kind. The active segment is
never deleted. Pure: the caller passes the segments and the clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SegmentSummary:
    base_offset: int
    next_offset: int
    size_bytes: int
    max_timestamp_ms: int | None


@dataclass(frozen=True, slots=True)
class Retention:
    retention_ms: int | None = 24 * 3600 * 1000
    retention_bytes: int | None = 1 << 30


def reclaim_floor(
    segments: Sequence[SegmentSummary], ack_floor: int, now_ms: int, retention: Retention
) -> int:
    """The offset below which whole segments may be deleted (a segment boundary, or the start)."""
    if not segments:
        return 0
    settled = [s for s in segments[:-1] if s.next_offset <= ack_floor]
    kept_bytes = sum(s.size_bytes for s in settled)
    floor = segments[0].base_offset
    for segment in settled:
        too_old = retention.retention_ms is not None and (
            segment.max_timestamp_ms is None
            or segment.max_timestamp_ms + retention.retention_ms <= now_ms)
        too_much = retention.retention_bytes is not None and kept_bytes > retention.retention_bytes
        if not (too_old or too_much):
            break
        floor = segment.next_offset
        kept_bytes -= segment.size_bytes
    return floor


_UNIT_MS = {"Y": 365 * 86_400_000, "M": 30 * 86_400_000, "D": 86_400_000,
            "h": 3_600_000, "m": 60_000, "s": 1000}


def max_age_ms(text: str) -> int:
    """RabbitMQ's `x-max-age` ("7D", "12h", "30m"...) in milliseconds."""
    digits, unit = text[:-1], text[-1:]
    if not digits.isdigit() or unit not in _UNIT_MS:
        raise ValueError(f"invalid max age {text!r}")
    return int(digits) * _UNIT_MS[unit]
