"""Reading consecutive batches from a segment file in large chunks.

Recovery, index rebuilding and reads all walk a segment batch by batch from
a known batch boundary. Reading a batch at a time would cost a system call
per batch, so the scanner reads windows of at least `chunk_bytes` and cuts
batches out of them. Every batch is validated (length, CRC, header) before it
is yielded; the first invalid one ends the walk with `ScanStop`, which tells
where and why, so the caller decides whether that is a torn tail to cut
(recovery of the active segment) or corruption to report (an older segment).
"""

from __future__ import annotations

from collections.abc import Iterator

from segments.filesystem import FileHandle
from segments.record_batch import (
    MAX_BATCH_BYTES,
    PREFIX_SIZE,
    BatchFormatError,
    RecordBatch,
    batch_size_from_prefix,
)

DEFAULT_CHUNK_BYTES = 1 << 20


class ScanStop(Exception):
    """The walk met bytes that are not a valid batch at `position`."""

    def __init__(self, position: int, reason: str, torn: bool) -> None:
        super().__init__(f"at byte {position}: {reason}")
        self.position = position
        self.reason = reason
        # True when the bytes simply end early: a write that never completed.
        self.torn = torn


def scan_batches(
    handle: FileHandle,
    start_position: int,
    end_position: int | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> Iterator[tuple[int, RecordBatch]]:
    """Yield (position, batch) from `start_position` up to `end_position` (default: file end).

    Raises ScanStop at the first invalid or incomplete batch.
    """
    end = handle.size() if end_position is None else end_position
    position = start_position
    window = b""
    window_start = position
    while position < end:
        offset_in_window = position - window_start
        if len(window) - offset_in_window < PREFIX_SIZE:
            window, window_start = _refill(handle, position, end, chunk_bytes, PREFIX_SIZE)
            offset_in_window = 0
            if len(window) < PREFIX_SIZE:
                raise ScanStop(position, "file ends inside a batch header", torn=True)
        _, size = batch_size_from_prefix(
            memoryview(window)[offset_in_window : offset_in_window + PREFIX_SIZE]
        )
        if size < PREFIX_SIZE or size > MAX_BATCH_BYTES:
            raise ScanStop(position, f"implausible batch size {size}", torn=False)
        if position + size > end:
            raise ScanStop(position, f"batch of {size} bytes runs past the end", torn=True)
        if len(window) - offset_in_window < size:
            window, window_start = _refill(handle, position, end, chunk_bytes, size)
            offset_in_window = 0
        data = window[offset_in_window : offset_in_window + size]
        try:
            batch = RecordBatch(data)
        except BatchFormatError as error:
            raise ScanStop(position, str(error), torn=False) from error
        yield position, batch
        position += size


def _refill(
    handle: FileHandle, position: int, end: int, chunk_bytes: int, needed: int
) -> tuple[bytes, int]:
    length = min(max(chunk_bytes, needed), end - position)
    return handle.read_at(position, length), position
