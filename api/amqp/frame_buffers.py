"""The byte buffers between a connection's socket and its machine.

`Inbox` holds what was received and not yet parsed into frames; `Outbox` what
the machine queued for the socket, stamped with the machine's clock for the
heartbeat sender.
"""

from __future__ import annotations

from pamqp import base

from api.amqp.frame_encoding import encode_method
from api.amqp.wire import RawFrame, parse_frame

__all__ = ["Inbox", "Outbox"]


class Inbox:
    """Bytes received from the socket and not yet consumed, read front to back."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._pos = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._buffer += data

    def peek(self, size: int) -> bytes:
        return bytes(self._buffer[self._pos : self._pos + size])

    def skip(self, size: int) -> None:
        self._pos += size

    def next_frame(self, max_payload: int) -> RawFrame | None:
        """Consume the next complete frame; None if incomplete (see :func:`parse_frame`)."""
        parsed = parse_frame(self._buffer, self._pos, max_payload)
        if parsed is None:
            return None
        frame, self._pos = parsed
        return frame

    def unread(self) -> tuple[bytearray, int]:
        """The buffer and where its unread bytes start (for a reader that scans in place;
        it reports what it took with `skip`)."""
        return self._buffer, self._pos

    def compact(self) -> None:
        """Free the consumed bytes."""
        if self._pos:
            del self._buffer[: self._pos]
            self._pos = 0

    def clear(self) -> None:
        self._buffer = bytearray()
        self._pos = 0


class Outbox:
    """Bytes waiting for the socket, and when the last of them was queued.

    ``now_ms`` is the owner's clock (the latest time it was told); writes are
    stamped with it for the heartbeat sender. Once ``sealed``, writes are dropped.
    """

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms
        self.last_write_ms = now_ms
        self.sealed = False
        self._buffer = bytearray()

    def write(self, data: bytes) -> None:
        if self.sealed:
            return
        self._buffer += data
        self.last_write_ms = self.now_ms

    def method(self, channel: int, method: base.Frame) -> None:
        self.write(encode_method(channel, method))

    def drain(self) -> bytes:
        out = bytes(self._buffer)
        self._buffer.clear()
        return out

    def __len__(self) -> int:
        return len(self._buffer)
