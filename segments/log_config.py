"""What a log is configured with, and the small values its operations return."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from segments.record_batch import Compression

MAX_SEGMENT_BYTES = 1 << 31  # positions in the index are u32; leave room for one batch


@dataclass(frozen=True)
class LogConfig:
    segment_bytes_max: int = 64 << 20
    segment_ms_max: int | None = None
    index_interval_bytes: int = 4096
    compression: Compression = Compression.NONE
    # Sealed segments whose file handle and indexes stay loaded at once.
    open_sealed_segments_max: int = 8

    def __post_init__(self) -> None:
        if not 0 < self.segment_bytes_max <= MAX_SEGMENT_BYTES:
            raise ValueError(f"segment_bytes_max must be in (0, {MAX_SEGMENT_BYTES}]")
        if self.index_interval_bytes <= 0:
            raise ValueError("index_interval_bytes must be positive")
        if self.segment_ms_max is not None and self.segment_ms_max <= 0:
            raise ValueError("segment_ms_max must be positive")
        if self.open_sealed_segments_max < 1:
            raise ValueError("open_sealed_segments_max must be at least 1")


class AppendResult(NamedTuple):
    """Offsets given to one append: `[base_offset, next_offset)`."""

    base_offset: int
    next_offset: int


class RecoveryReport(NamedTuple):
    segment_count: int
    scanned_bytes: int
    truncated_bytes: int
