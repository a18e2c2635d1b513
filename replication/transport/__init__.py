"""The cluster transport: authenticated, framed TCP links between nodes.

Import from here; the submodules are the implementation's parts: pure
framing (`frames`), the pure handshake (`handshake`), the secret file
(`cluster_secret`), and the asyncio shell (`cluster_transport`, with the
per-peer link machinery in `link_manager` and `peer_link`).
"""

from replication.transport.cluster_secret import ClusterSecretError, load_or_create_secret
from replication.transport.cluster_transport import ClusterTransport
from replication.transport.config import PeerAddress, TransportLimits, TransportStats
from replication.transport.frames import (
    FrameDecoder,
    FrameError,
    FrameTooLargeError,
    encode_frame,
)
from replication.transport.handshake import (
    PROTOCOL_VERSION,
    Handshake,
    HandshakeError,
    MalformedHandshakeError,
    PeerIdentity,
    ProtocolVersionError,
    UnexpectedPeerError,
    WrongSecretError,
)

__all__ = [
    "PROTOCOL_VERSION",
    "ClusterSecretError",
    "ClusterTransport",
    "FrameDecoder",
    "FrameError",
    "FrameTooLargeError",
    "Handshake",
    "HandshakeError",
    "MalformedHandshakeError",
    "PeerAddress",
    "PeerIdentity",
    "ProtocolVersionError",
    "TransportLimits",
    "TransportStats",
    "UnexpectedPeerError",
    "WrongSecretError",
    "encode_frame",
    "load_or_create_secret",
]
