"""The client connections of a node, whatever protocol they speak (for listing and metrics)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class ConnectionInfo:
    connection_id: str
    protocol: str  # "AMQP 0-9-1", "WebSocket"
    peer_host: str
    peer_port: int
    user: str
    vhost: str
    connected_at_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    channels: int = 0
    auth_mechanism: str = ""  # PLAIN, AMQPLAIN, EXTERNAL (AMQP)
    ssl: bool = False  # the connection came through a TLS listener
    state: str = "running"  # RabbitMQ's connection states: "flow", "blocked" while not read


class ConnectionRegistry:
    """Open connections by id; front ends add theirs when opened and remove them when closed."""

    def __init__(self, limit: int = 1_000_000) -> None:
        self._connections: dict[str, ConnectionInfo] = {}
        self._limit = limit

    def add(self, info: ConnectionInfo) -> None:
        if len(self._connections) < self._limit:
            self._connections[info.connection_id] = info

    def remove(self, connection_id: str) -> None:
        self._connections.pop(connection_id, None)

    def get(self, connection_id: str) -> ConnectionInfo | None:
        return self._connections.get(connection_id)

    def all(self) -> list[ConnectionInfo]:
        return list(self._connections.values())

    def __len__(self) -> int:
        return len(self._connections)
