"""Length-prefixed frames: a u32 big-endian payload length, then the payload.

Pure: `encode_frame` builds the bytes to write, `FrameDecoder` turns whatever
chunks the socket delivers back into payloads. Both refuse a frame over the
limit; the decoder does so as soon as the 4-byte header arrives, before it
buffers any of the payload, so a hostile or confused peer cannot make it
allocate more than `max_frame_bytes` plus one read.
"""

from __future__ import annotations

import struct

HEADER = struct.Struct(">I")
HEADER_BYTES = HEADER.size
MAX_FRAME_LIMIT = (1 << 32) - 1  # the largest length the header can express


class FrameError(Exception):
    """The byte stream is not a valid sequence of frames."""


class FrameTooLargeError(FrameError, ValueError):
    """A frame over the configured maximum, announced by a peer or passed to send."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the {limit}-byte limit")
        self.size = size
        self.limit = limit


def check_limit(max_frame_bytes: int) -> int:
    if not 0 < max_frame_bytes <= MAX_FRAME_LIMIT:
        raise ValueError(f"max_frame_bytes must be in 1..{MAX_FRAME_LIMIT}, not {max_frame_bytes}")
    return max_frame_bytes


def frame_header(size: int, max_frame_bytes: int) -> bytes:
    """The 4-byte header for a payload of `size` bytes; refuses an oversize one."""
    if size > max_frame_bytes:
        raise FrameTooLargeError(size, max_frame_bytes)
    return HEADER.pack(size)


def encode_frame(payload: bytes, max_frame_bytes: int = MAX_FRAME_LIMIT) -> bytes:
    return frame_header(len(payload), max_frame_bytes) + payload


class FrameDecoder:
    """Accumulates received bytes and yields complete payloads in order.

    `max_frame_bytes` may be raised between frames (the transport decodes the
    handshake with a small limit, then switches to the configured one without
    losing bytes that arrived together with the handshake's last frame).
    """

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = check_limit(max_frame_bytes)
        self._buffer = bytearray()
        self._start = 0  # consumed prefix of _buffer, dropped lazily to avoid O(n^2) copies

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as part of a frame."""
        return len(self._buffer) - self._start

    def feed(self, data: bytes) -> None:
        if self._start and self._start * 2 >= len(self._buffer):
            del self._buffer[: self._start]
            self._start = 0
        self._buffer += data

    def next_frame(self) -> bytes | None:
        """The next complete payload, or None until more bytes are fed.

        Raises FrameTooLargeError when the next header announces an oversize
        frame; the stream cannot be resynchronised after that.
        """
        available = len(self._buffer) - self._start
        if available < HEADER_BYTES:
            return None
        (size,) = HEADER.unpack_from(self._buffer, self._start)
        if size > self.max_frame_bytes:
            raise FrameTooLargeError(size, self.max_frame_bytes)
        if available < HEADER_BYTES + size:
            return None
        begin = self._start + HEADER_BYTES
        self._start = begin + size
        return bytes(self._buffer[begin : self._start])

    def frames(self) -> list[bytes]:
        """Every complete payload buffered so far."""
        out = []
        while (frame := self.next_frame()) is not None:
            out.append(frame)
        return out
