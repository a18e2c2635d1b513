"""The operating system's file behind `RealFileSystem.open`, appended cheaply.

Every file system implements the narrow `FileHandle` protocol (filesystem.py).
This one also does two things on its own, which no caller asks for and no
reader can see, to make the appends and fsyncs of a log's active segment
cheaper on a real disk:

- space reservation (`space_reservation`): a growing file gets disk blocks
  reserved ahead of its end, without moving its size, when an append passes
  the reserved end;
- zero fill (`zero_fill`): a file that is synced as it grows gets zeros
  written ahead of its data when an append leaves few of them, so the
  fdatasyncs that follow flush data only. Appends then write at the end of
  the data with `pwritev` (O_APPEND is cleared, since Linux would append a
  pwrite at the file's end).

Theory of operation. `_size` is the end of the data, which is all that
`size`, `read_at` and every caller see; `_filled_end` is where the file's
zeros end (the file's own size, at or past `_size`); `_reserved_end` is where
the reservation stops. Both extras are optimisations, never conditions: a
refused reservation or a disk too full to fill leaves the appends to extend
the file as usual.

Invariants:
- `_size <= _filled_end`, and the bytes in `[_size, _filled_end)` are zeros
  this handle wrote (only the file's single writer, the appender, fills);
- `truncate(n)` leaves a file of exactly n bytes and gives back every
  reserved block and filled zero past it; so does `close`. A segment that is
  sealed is truncated to its data, so sealed files hold no zeros;
- a zero fill happens only inside an append, after its data is written, and
  only if the file was synced since the previous fill (or its opening).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Sequence

from segments.space_reservation import reservation_supported, reserve, reserve_ahead_bytes
from segments.zero_fill import fill_end, write_zeros

_IOV_MAX = 1024
_LEFTOVER_SLACK_BYTES = 64 << 10


class RealFileHandle:
    """A file descriptor opened O_APPEND; reads use pread so they never move the write end.

    See the module docstring for the reservation and the zeros it keeps ahead.
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        status = os.fstat(self._fd)
        self._size = status.st_size
        self._reserving = reservation_supported()
        self._reserved_end = self._size
        self._filled_end = self._size
        self._positional = False  # True once O_APPEND is off (see _fill_ahead)
        # Set by `sync` on the fsync thread (or by `synced` on the appender's loop),
        # cleared by a fill on the appender: a race at worst delays one fill by one
        # append, never corrupts anything.
        self._synced_since_fill = False
        # Far more blocks than the data needs (beyond the last partial block and
        # extent-tree blocks): a process that died while holding a reservation; the
        # first truncation or the close gives them back.
        self._leftover_reservation = status.st_blocks * 512 > self._size + _LEFTOVER_SLACK_BYTES

    @property
    def path(self) -> str:
        return self._path

    def size(self) -> int:
        return self._size

    def append(self, data: bytes) -> None:
        self.append_parts((data,))

    def append_parts(self, parts: Sequence[bytes]) -> None:
        total = sum(map(len, parts))
        end = self._size + total
        if end > self._reserved_end and end > self._filled_end and self._reserving:
            self._reserve(end)
        try:
            if len(parts) > _IOV_MAX:
                written = 0
            elif self._positional:
                written = os.pwritev(self._fd, parts, self._size)
            else:
                written = os.writev(self._fd, parts)
            if written != total:
                self._write_rest(parts, written)
        except BaseException:
            # After a short write or an error the size must be read back. Bytes
            # written into filled zeros are past `_size` and count for nothing.
            if not self._positional:
                self._size = os.fstat(self._fd).st_size
            raise
        self._size = end
        if end > self._filled_end:
            self._filled_end = end
        if self._synced_since_fill:
            self._fill_ahead()

    def _write_rest(self, parts: Sequence[bytes], written: int) -> None:
        """Finish a short or oversized write, part by part."""
        pending = [memoryview(part) for part in parts if part]
        position = self._size + written
        while pending:
            while pending and written >= len(pending[0]):
                written -= len(pending[0])
                pending.pop(0)
            if pending:
                pending[0] = pending[0][written:]
                if self._positional:
                    written = os.pwritev(self._fd, pending[:_IOV_MAX], position)
                else:
                    written = os.writev(self._fd, pending[:_IOV_MAX])
                position += written

    def _fill_ahead(self) -> None:
        """Zeros ahead of the data when few are left (see `zero_fill`); a failure to
        write them is the next append's to meet, so only the data's errors raise."""
        end = fill_end(self._size, self._filled_end)
        if end is None:
            return
        self._synced_since_fill = False
        if not self._positional:
            flags = fcntl.fcntl(self._fd, fcntl.F_GETFL)
            fcntl.fcntl(self._fd, fcntl.F_SETFL, flags & ~os.O_APPEND)
            self._positional = True
        self._filled_end = write_zeros(self._fd, max(self._filled_end, self._size), end)

    def _reserve(self, needed_end: int) -> None:
        ahead = reserve_ahead_bytes(self._size)
        if not ahead:
            return
        start = max(self._reserved_end, self._size)
        outcome = reserve(self._fd, start, needed_end + ahead - start)
        if outcome is None:
            self._reserving = False
        elif outcome:
            self._reserved_end = needed_end + ahead

    def read_at(self, position: int, length: int) -> bytes:
        return os.pread(self._fd, length, position)

    def truncate(self, size: int) -> None:
        # Also frees blocks reserved and zeros filled past the end (to the same size, too).
        os.ftruncate(self._fd, size)
        self._size = size
        self._reserved_end = size
        self._filled_end = size
        self._leftover_reservation = False

    def sync(self) -> None:
        # fdatasync also flushes the file size, which is all the metadata an
        # append-only file needs to read its data back; it skips mtime updates.
        os.fdatasync(self._fd)
        self.synced()

    def sync_fd(self) -> int:
        """The descriptor to fdatasync in place of `sync` (then call `synced`)."""
        return self._fd

    def synced(self) -> None:
        """An fdatasync of this file finished (by `sync` or of `sync_fd`)."""
        self._synced_since_fill = True

    def close(self) -> None:
        if self._fd >= 0:
            try:
                with contextlib.suppress(OSError):  # only space, never data, is at stake
                    self._release_space()
            finally:
                os.close(self._fd)
                self._fd = -1

    def _release_space(self) -> None:
        """Give back the zeros and reserved blocks past the data."""
        if self._filled_end > self._size:
            # Zeros past the data are this handle's own (only the writer fills).
            self.truncate(self._size)
        elif self._reserved_end > self._size or self._leftover_reservation:
            # The file's own size, not ours: should another handle have appended,
            # cutting to a stale size would lose its data.
            self.truncate(os.fstat(self._fd).st_size)
