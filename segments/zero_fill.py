"""Zeros written ahead of a synced file's end, so its fsyncs need not commit metadata.

Why: an fdatasync after an append must also commit the file's new size (and,
on ext4, the conversion of the blocks it wrote from unwritten to written),
which is a journal commit on top of the data flush. Overwriting blocks that
already hold zeros, written and synced earlier, changes no metadata that
fdatasync has to keep, so it only flushes the data: on this project's VM a
~66 KB fdatasync took 300-380 µs after appends and 160-200 µs after
overwrites (docs/benchmarks.md). It is the trick PostgreSQL plays with its
zero-filled WAL segments.

How: the real file handle (`real_file_handle`) fills on its own, inside an
append, once few zeros are left ahead of the data and the file was synced
since its previous fill (a group-committed log is synced after every group;
a file nobody syncs gets no zeros). The stretch's new size is committed by
the next sync and the appends after it land on zeros, written at the end of
the data (`pwritev` at a position) rather than at the end of the file
(filling on the appender's thread: a filler thread was tried and lost to the
GIL, see docs/benchmarks.md). The zeros are never data: every reader stops at
the data's end, sealing a segment and closing a handle cut them off, and
recovery after a crash cuts them like any tail that is not a valid batch (a
zero prefix is an implausible batch size). The handle does not know where its
segment will roll, so one stretch may pass that point; the seal cuts it.

Filling is an optimisation, never a condition for a write: a full disk stops
it quietly and the appends that follow extend the file as before.
"""

from __future__ import annotations

import errno
import os

# Zeros ahead of the data: a quarter of the data, at most FILL_AHEAD_BYTES, and
# none below FILL_MIN_BYTES, so a quiet queue's small segment (or a metadata
# log) holds no zeros it may never use. Each fill is one metadata commit; a
# queue writing 64 KB per sync gets 32 syncs that flush data only in between
# (1 MiB gave 8, and the group-commit benchmark 10% less: docs/benchmarks.md).
FILL_AHEAD_BYTES = 4 << 20
FILL_MIN_BYTES = 64 << 10
_ZEROS = memoryview(bytes(256 << 10))
# The disk is full or the file at its limit: stop filling, the appends decide.
_OUT_OF_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def fill_end(data_end: int, filled_end: int) -> int | None:
    """Where to fill up to for data ending at `data_end`, or None if no fill is due.

    `filled_end` is where zeros already reach. A fill is due once less than half
    of the wanted stretch is left, and worth it only if it adds FILL_MIN_BYTES.
    """
    ahead = min(FILL_AHEAD_BYTES, data_end // 4)
    if ahead < FILL_MIN_BYTES or filled_end - data_end >= ahead // 2:
        return None
    end = data_end + ahead
    return end if end - max(filled_end, data_end) >= FILL_MIN_BYTES else None


def write_zeros(fd: int, start: int, end: int) -> int:
    """Write zeros over `[start, end)` of `fd`; returns where the zeros now reach.

    Stops early, without raising, when the disk is full; other errors raise.
    """
    position = start
    try:
        while position < end:
            position += os.pwrite(fd, _ZEROS[: min(end - position, len(_ZEROS))], position)
    except OSError as error:
        if error.errno not in _OUT_OF_SPACE:
            raise
    return position
