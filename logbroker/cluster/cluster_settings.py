"""How a node takes part in a cluster: its name, addresses, peers, secret and timings."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from replication.transport import PeerAddress

DEFAULT_CLUSTER_PORT = 25672


class PeerSpecError(ValueError):
    pass


def parse_peer(spec: str) -> PeerAddress:
    """`name@host:port` (the name may itself contain '@', as RabbitMQ's `rabbit@host`)."""
    name, at, address = spec.strip().rpartition("@")
    host, colon, port = address.rpartition(":")
    if not at or not name or not colon or not host:
        raise PeerSpecError(f"peer {spec!r} is not name@host:port")
    try:
        port_number = int(port)
    except ValueError:
        raise PeerSpecError(f"peer {spec!r}: {port!r} is not a port number") from None
    if not 0 < port_number < 65536:
        raise PeerSpecError(f"peer {spec!r}: port out of range")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise PeerSpecError(f"peer {spec!r}: write an IPv6 address in brackets, [::1]:port")
    if not host:
        raise PeerSpecError(f"peer {spec!r} has an empty host")
    try:
        return PeerAddress(name, host, port_number)
    except ValueError as error:
        raise PeerSpecError(f"peer {spec!r}: {error}") from None


def parse_peers(specs: str) -> tuple[PeerAddress, ...]:
    peers = tuple(parse_peer(spec) for spec in specs.split(",") if spec.strip())
    names = [peer.name for peer in peers]
    if len(set(names)) != len(names):
        raise PeerSpecError(f"a node is listed twice in {specs!r}")
    return peers


@dataclass(frozen=True)
class ClusterSettings:
    node_name: str
    secret: bytes
    bind_host: str = "0.0.0.0"
    cluster_port: int = DEFAULT_CLUSTER_PORT
    # The founding members (may include this node), or for a joining node the
    # members it may ask; addresses are also learnt from the metadata.
    peers: tuple[PeerAddress, ...] = ()
    join: bool = False
    amqp_port: int = 5672
    http_port: int = 15672
    heartbeat_ms: int = 500
    session_timeout_ms: int = 3000
    link_grace_ms: int = 500  # a broken link to a node: down after this, not the timeout
    # A queue leader delivers only while it heard the controller (or, as the Raft
    # leader, a quorum) this recently: well below the quickest the controller can
    # declare it down (a silent link's timeout plus link_grace_ms; or the session
    # timeout), so no new leader is elected while the old one may still deliver.
    lease_ms: int = 1000
    proposal_timeout_s: float = 5.0
    raft_tick_s: float = 0.05
    default_locator: str = "client-local"
    # The machine this node runs on (the workers of one `serve --workers N` share it)
    # and its zone: placement puts a queue's copies on different ones first.
    host_id: str = ""
    zone: str = ""
    # (accepting, dialing) TLS contexts of the cluster link (None: plain TCP).
    link_tls: tuple[ssl.SSLContext, ssl.SSLContext] | None = None

    @property
    def advertised_host(self) -> str:
        """Where the others reach this node: its own entry in `peers` if listed, else
        the bind address (loopback when bound to every interface)."""
        for peer in self.peers:
            if peer.name == self.node_name:
                return peer.host
        return "127.0.0.1" if self.bind_host in ("0.0.0.0", "::", "") else self.bind_host

    def others(self) -> tuple[PeerAddress, ...]:
        return tuple(peer for peer in self.peers if peer.name != self.node_name)
