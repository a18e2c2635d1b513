"""Where peers are and how much the transport may hold for each."""

from __future__ import annotations

from dataclasses import dataclass

from replication.transport.frames import check_limit
from replication.transport.handshake import check_node_name


@dataclass(frozen=True)
class PeerAddress:
    name: str  # node name, e.g. "n1@127.0.0.1": non-empty, at most 255 bytes of UTF-8
    host: str
    port: int

    def __post_init__(self) -> None:
        check_node_name(self.name)
        if not 0 < self.port < 65536:
            raise ValueError(f"peer {self.name!r}: port {self.port} is not in 1..65535")


@dataclass(frozen=True)
class TransportLimits:
    max_frame_bytes: int = 64 << 20
    send_queue_frames: int = 10_000  # per peer
    send_queue_bytes: int = 64 << 20  # per peer
    handshake_timeout_s: float = 5.0  # also bounds how long a replaced link may take to end
    reconnect_min_s: float = 0.05
    reconnect_max_s: float = 2.0
    # Heartbeats: a link with nothing to send carries a ping (an empty frame) every
    # `ping_interval_s`; one the peer has been silent on for `idle_timeout_s` is
    # broken (a paused or cut-off peer leaves its TCP connection up).
    ping_interval_s: float = 0.5
    idle_timeout_s: float = 2.0

    def __post_init__(self) -> None:
        check_limit(self.max_frame_bytes)
        if self.send_queue_frames < 1 or self.send_queue_bytes < 1:
            raise ValueError("send queue limits must be positive")
        if self.handshake_timeout_s <= 0:
            raise ValueError("handshake_timeout_s must be positive")
        if not 0 < self.reconnect_min_s <= self.reconnect_max_s:
            raise ValueError("need 0 < reconnect_min_s <= reconnect_max_s")
        if not 0 < self.ping_interval_s < self.idle_timeout_s:
            raise ValueError("need 0 < ping_interval_s < idle_timeout_s")


@dataclass(frozen=True)
class TransportStats:
    """Counters since start, for metrics and tests."""

    open_connections: int  # sockets open now, handshaking or linked
    connections_accepted: int
    connections_dialed: int
    handshake_failures: int
    links_replaced: int  # duplicate or stale links retired in favour of another
    frames_sent: int  # written to a socket
    frames_received: int  # delivered to on_frame
    frames_refused: int  # send() returned False
    frames_dropped: int  # accepted by send() but still queued when the peer went down
