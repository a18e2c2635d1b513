"""Per-peer state and per-connection links of the cluster transport.

A `PeerLink` is one authenticated TCP connection; a `PeerState` is everything
the transport keeps about one peer: the send queue (per peer, so it survives
a change of connection), the current link and every other live link, and the
dial back-off. `keeps_new_link` is the pure rule that decides, identically on
both ends, which of two connections between the same pair survives.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

from replication.transport.backoff import Backoff
from replication.transport.frames import HEADER, FrameDecoder


def keeps_new_link(own_name: str, peer_name: str, current_dialer: str, new_dialer: str) -> bool:
    """Whether a link that just authenticated replaces the current one (same peer incarnation).

    Two links dialed by different ends are a simultaneous dial: keep the one
    dialed by the node whose name sorts lower, so both ends choose the same
    connection without a message. Two dialed by the same end: that end only
    dials when it has no link, so it has already given up on the older one.
    """
    if current_dialer == new_dialer:
        return True
    return new_dialer == min(own_name, peer_name)


@dataclass(eq=False)
class PeerLink:
    """One authenticated connection to a peer.

    `after` lists the links whose frames must all be read (up to the peer's
    half-close) before this one may write or deliver: see cluster_transport.py.
    """

    peer: str
    incarnation: bytes
    dialed_by: str
    address: str  # "host:port" of the other end, for logs
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    decoder: FrameDecoder
    retiring: bool = False  # replaced: stop writing, half-close, read to the end
    closed: bool = False
    finished: asyncio.Event = field(default_factory=asyncio.Event)  # nothing more to read
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # for the writer task
    after: list[PeerLink] = field(default_factory=list)
    writer_task: asyncio.Task[None] | None = None
    deadline: asyncio.TimerHandle | None = None
    heard: float = 0.0  # loop time of the last bytes read (heartbeats: link_manager)
    watchdog: asyncio.TimerHandle | None = None

    def describe(self) -> str:
        return f"{self.peer} ({self.address})"


class PeerState:
    """Everything about one peer. Invariant: `current` is None or in `links` and not retiring."""

    def __init__(self, name: str, backoff: Backoff) -> None:
        self.name = name
        self.backoff = backoff
        self.queue: deque[bytes] = deque()
        self.queued_bytes = 0
        self.current: PeerLink | None = None
        self.links: set[PeerLink] = set()  # live links: the current one and retiring ones
        self.pending = 0  # handshakes past the hello that name this peer
        self.settled = asyncio.Event()  # set while pending == 0
        self.settled.set()
        self.disconnected = asyncio.Event()  # set while current is None; the dialer waits on it
        self.disconnected.set()
        self.last_dial_failure: str | None = None  # to log a repeated failure once

    def enqueue(self, payload: bytes, max_frames: int, max_bytes: int) -> bool:
        if len(self.queue) >= max_frames or self.queued_bytes + len(payload) > max_bytes:
            return False
        self.queue.append(payload)
        self.queued_bytes += len(payload)
        return True

    def take_batch(self, max_bytes: int) -> tuple[int, bytes]:
        """Frames from the head of the queue, encoded, up to about `max_bytes` (at least one)."""
        parts: list[bytes] = []
        size = 0
        while self.queue and (not parts or size < max_bytes):
            payload = self.queue.popleft()
            self.queued_bytes -= len(payload)
            parts += (HEADER.pack(len(payload)), payload)
            size += HEADER.size + len(payload)
        return len(parts) // 2, b"".join(parts)

    def clear_queue(self) -> int:
        dropped = len(self.queue)
        self.queue.clear()
        self.queued_bytes = 0
        return dropped

    def begin_pending(self) -> None:
        self.pending += 1
        self.settled.clear()

    def end_pending(self) -> None:
        self.pending -= 1
        if self.pending == 0:
            self.settled.set()

    def idle(self) -> bool:
        return not self.links and self.pending == 0 and not self.queue
