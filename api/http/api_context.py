"""What every route needs: the broker, the node's description, leases, the cluster and the
clock (wall time: lease deadlines and uptime are shown as dates; the rates are the broker's).

`cluster`, `replicas` and `peers` are None on a standalone node (started without `--peers` /
`--join`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from api.http.leases import LeaseTable
from api.http.peer_views import PeerViews
from logbroker.broker import Broker
from logbroker.cluster.cluster_control import ClusterControl, ReplicaControl
from logbroker.federation.federation_statuses import FederationStatuses
from segments.clock import SYSTEM_CLOCK, Clock

HTTP_CONNECTION_ID = "http"  # REST calls share one pseudo-connection (no exclusive queues)


@dataclass(frozen=True)
class Listeners:
    amqp_port: int  # 0: plain AMQP is off
    http_port: int
    host: str = "127.0.0.1"
    amqps_port: int | None = None  # the TLS listeners, when a certificate is configured
    https_port: int | None = None

    def enabled(self) -> list[tuple[str, int]]:
        """(protocol, port) of every listener that is on, with RabbitMQ's protocol names."""
        ports = (("amqp", self.amqp_port), ("amqp/ssl", self.amqps_port),
                 ("http", self.http_port), ("https", self.https_port))
        return [(protocol, port) for protocol, port in ports if port]


@dataclass
class ApiContext:
    broker: Broker
    listeners: Listeners
    started_at_ms: int = -1  # -1: now, by `clock`
    leases: LeaseTable = field(default_factory=LeaseTable)
    max_body_bytes: int = 64 * 1024 * 1024
    metrics_auth: bool = False  # /metrics asks for a monitoring login (--metrics-auth)
    federation: FederationStatuses | None = None  # federation links and shovels (status)
    connection_id: str = HTTP_CONNECTION_ID
    cluster: ClusterControl | None = None
    replicas: ReplicaControl | None = None
    peers: PeerViews | None = None  # the other members' connections (clustered only)
    clock: Clock = SYSTEM_CLOCK

    def __post_init__(self) -> None:
        if self.started_at_ms < 0:
            self.started_at_ms = self.clock.wall_ms()

    @property
    def node_name(self) -> str:
        return self.broker.config.node_name

    def node_up(self, name: str) -> bool:
        """Whether the controller has node `name` up (a standalone node: only itself)."""
        record = self.broker.state.cluster_node(name)
        return name == self.node_name if record is None else record.up


async def api_context(request: Request) -> ApiContext:
    context: ApiContext = request.app.state.context
    return context
