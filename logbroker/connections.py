"""The client connections of a node, whatever protocol they speak (for listing and metrics)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from logbroker.message_stats import ChannelCounters
from segments.clock import SYSTEM_CLOCK, Clock


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    """One open channel as the management API lists it (RabbitMQ's fields)."""

    number: int
    prefetch_count: int  # for consumers created from now on (basic.qos global=false)
    global_prefetch_count: int  # channel-wide (basic.qos global=true); 0: no limit
    messages_unacknowledged: int
    consumer_count: int
    confirm: bool
    transactional: bool
    counters: ChannelCounters = field(default_factory=ChannelCounters)  # the live ones


def _no_channels() -> list[ChannelInfo]:
    return []


@dataclass
class ConnectionInfo:
    connection_id: str
    protocol: str  # "AMQP 0-9-1", "WebSocket"
    peer_host: str
    peer_port: int
    user: str
    vhost: str
    connected_at_ms: int = 0  # wall clock; 0: stamped by the registry when added
    channels: int = 0
    auth_mechanism: str = ""  # PLAIN, AMQPLAIN, EXTERNAL (AMQP)
    ssl: bool = False  # the connection came through a TLS listener
    state: str = "running"  # RabbitMQ's connection states: "flow", "blocked" while not read
    recv_oct: int = 0  # bytes read from the client (AMQP)
    send_oct: int = 0  # bytes written to it
    # What the client said of itself and what was negotiated (AMQP).
    client_properties: dict[str, object] = field(default_factory=dict)
    frame_max: int = 0
    channel_max: int = 0
    heartbeat_s: int = 0
    # The front end's: its open channels, and a server-side close with a reason (RabbitMQ's
    # 320 CONNECTION_FORCED); None: this protocol cannot be closed so.
    channel_infos: Callable[[], list[ChannelInfo]] = field(default=_no_channels, repr=False)
    close: Callable[[str], None] | None = field(default=None, repr=False)


# The registry never lists more than this many, whatever the limits say.
REGISTRY_MAX = 1_000_000


class ConnectionRegistry:
    """Open connections by id; front ends add theirs when opened and remove them when closed,
    and ask `refusal` first: RabbitMQ's node limit (`connection_max`) and the vhost limit
    (`max-connections`) are counted here, over every protocol."""

    def __init__(self, max_connections: int = 0, clock: Clock = SYSTEM_CLOCK) -> None:
        self._connections: dict[str, ConnectionInfo] = {}
        self._clock = clock
        self.max_connections = max_connections  # 0: no limit

    def refusal(self, vhost: str, vhost_max: int | None = None) -> str | None:
        """Why one more connection to `vhost` may not open (RabbitMQ's texts; the caller
        answers 530 NOT_ALLOWED), or None. `vhost_max`: the vhost's max-connections."""
        node_max = self.max_connections or REGISTRY_MAX
        if len(self._connections) >= node_max:
            return f"connection refused: node connection limit ({node_max}) is reached"
        if vhost_max is not None and vhost_max >= 0 and sum(
                1 for info in self._connections.values() if info.vhost == vhost) >= vhost_max:
            return (f"connection refused: connection limit ({vhost_max}) is reached for "
                    f"vhost '{vhost}'")
        return None

    def add(self, info: ConnectionInfo) -> None:
        if not info.connected_at_ms:
            info.connected_at_ms = self._clock.wall_ms()
        if len(self._connections) < REGISTRY_MAX:
            self._connections[info.connection_id] = info

    def remove(self, connection_id: str) -> None:
        self._connections.pop(connection_id, None)

    def get(self, connection_id: str) -> ConnectionInfo | None:
        return self._connections.get(connection_id)

    def all(self) -> list[ConnectionInfo]:
        return list(self._connections.values())

    def __len__(self) -> int:
        return len(self._connections)
