"""`ClientLink`: one simulated TCP connection between an outside client and a node.

Theory of operation
-------------------
Clients are outside the cluster network, so a link is not a `Network`
message path: it is a byte stream each way, in order, never lost or
duplicated, but cut into chunks at random points, each chunk arriving a
random number of ticks later (never before the chunk sent ahead of it).
A side that closes its end (`close_from_client` / `close_from_node`) sends an
end of stream behind its last bytes; the other side sees it after them. A
crash (`crash`) is a reset instead: what is in flight is thrown away and the
client learns it after a delay. A partition between the client and its node
makes the link `silent`: nothing arrives either way until the heal (TCP
retransmits then), so only the heartbeats of either side can end it meanwhile.

Invariants: bytes arrive in the order they were sent, each exactly once, or
not at all once the link is reset; nothing arrives after an end of stream;
`node_mid_frame` says that the node has received part of a frame the client
wrote but not all of it (asked when the link ends: it was cut inside a frame;
the client knows the same of the node's frames from its own buffer).
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from dataclasses import dataclass

EOF = None  # the end of stream, queued behind a closing side's last bytes


@dataclass
class _Chunk:
    at: int
    data: bytes | None


class _Direction:
    """The bytes on their way one way, in order."""

    def __init__(self) -> None:
        self.chunks: deque[_Chunk] = deque()
        self.last_at = 0
        self.closed = False  # an end of stream was queued

    def due(self, now: int) -> tuple[bytes, bool]:
        """The bytes arrived by `now`, and whether the end of stream came behind them."""
        data = bytearray()
        while self.chunks and self.chunks[0].at <= now:
            chunk = self.chunks.popleft().data
            if chunk is EOF:
                self.chunks.clear()
                return bytes(data), True
            data += chunk
        return bytes(data), False


class ClientLink:
    """A client's connection to `node` (see the module docstring)."""

    def __init__(self, node: str, rng: random.Random, max_delay: int) -> None:
        self.node = node
        self.silent = False
        self.reset_at: int | None = None  # the node crashed: the client's end resets then
        self._rng = rng
        self._max_delay = max_delay
        self._to_node = _Direction()
        self._to_client = _Direction()
        self._frame_ends: deque[int] = deque()  # where the client's frames end, in bytes
        self._written = 0
        self._node_received = 0
        self._node_boundary = 0  # the last frame end the node has received

    # ------------------------------------------------------------- sending

    def send_to_node(self, frames: list[bytes], now: int) -> None:
        """The client writes `frames` (their ends are kept to tell a cut inside one)."""
        for frame in frames:
            self._written += len(frame)
            self._frame_ends.append(self._written)
        self._send(self._to_node, b"".join(frames), now)

    def send_to_client(self, data: bytes, now: int) -> None:
        self._send(self._to_client, data, now)

    def _send(self, direction: _Direction, data: bytes, now: int) -> None:
        if direction.closed or self.reset_at is not None or not data:
            return
        for piece in self._split(data):
            self._queue(direction, piece, now)

    def _split(self, data: bytes) -> list[bytes]:
        cuts = sorted(self._rng.sample(range(1, len(data)), min(len(data) - 1,
                                                                self._rng.randint(0, 2))))
        bounds = [0, *cuts, len(data)]
        return [data[a:b] for a, b in itertools.pairwise(bounds)]

    def _queue(self, direction: _Direction, data: bytes | None, now: int) -> None:
        direction.last_at = max(direction.last_at, now + self._rng.randint(0, self._max_delay))
        direction.chunks.append(_Chunk(direction.last_at, data))

    # ------------------------------------------------------------- endings

    def close_from_client(self, now: int) -> None:
        self._close(self._to_node, now)

    def close_from_node(self, now: int) -> None:
        self._close(self._to_client, now)

    def _close(self, direction: _Direction, now: int) -> None:
        if not direction.closed:
            direction.closed = True
            self._queue(direction, EOF, now)

    def crash(self, now: int) -> None:
        """The node's process died: its socket is gone, the client's end resets."""
        if self.reset_at is None:
            self.reset_at = now + self._rng.randint(1, self._max_delay + 1)
            self._to_node.chunks.clear()
            self._to_client.chunks.clear()

    # ------------------------------------------------------------ receiving

    def due_at_node(self, now: int) -> tuple[bytes, bool]:
        """What reaches the node by `now`, and whether the client's end of stream did."""
        if self.silent:
            return b"", False
        data, ended = self._to_node.due(now)
        self._node_received += len(data)
        while self._frame_ends and self._frame_ends[0] <= self._node_received:
            self._node_boundary = self._frame_ends.popleft()
        return data, ended

    def due_at_client(self, now: int) -> tuple[bytes, bool]:
        """What reaches the client by `now`, and whether the link ended for it (the
        node's end of stream, or the reset of a crashed node)."""
        if self.silent:
            return b"", False
        if self.reset_at is not None:
            return b"", now >= self.reset_at
        return self._to_client.due(now)

    def node_mid_frame(self) -> bool:
        """The node holds part of a frame the client wrote, without its end."""
        return self._node_received != self._node_boundary
