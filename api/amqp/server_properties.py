"""Connection settings and what the server says about itself in connection.start.

:class:`ConnectionConfig` holds every limit the connection machine enforces.
:func:`server_properties` builds the ``server-properties`` table of
connection.start with the same keys RabbitMQ sends (``product``, ``version``,
``platform``, ``cluster_name``, ``copyright``, ``information`` and the
``capabilities`` table), so clients that look at capabilities (pika, aio-pika,
kombu / py-amqp, the Java client) switch on the same extensions they use with
RabbitMQ.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from pamqp import common

__all__ = [
    "AUTH_MECHANISMS",
    "FRAME_MIN_SIZE",
    "LOCALES",
    "SERVER_CAPABILITIES",
    "TLS_AUTH_MECHANISMS",
    "ConnectionConfig",
    "server_properties",
]

#: Smallest frame_max the spec allows a peer to negotiate; also the frame limit
#: before tune-ok, as RabbitMQ's ``initial_frame_max``.
FRAME_MIN_SIZE = 4096

#: Offered in connection.start; both complete in one step (no connection.secure).
AUTH_MECHANISMS = "PLAIN AMQPLAIN"
#: On a TLS listener that verifies client certificates: also EXTERNAL, the login by
#: certificate (RabbitMQ's rabbitmq_auth_mechanism_ssl), one step too.
TLS_AUTH_MECHANISMS = "PLAIN AMQPLAIN EXTERNAL"
LOCALES = "en_US"

#: Exactly the capabilities RabbitMQ advertises for AMQP 0-9-1 (rabbit_reader).
SERVER_CAPABILITIES: dict[str, bool] = {
    "publisher_confirms": True,
    "exchange_exchange_bindings": True,
    "basic.nack": True,
    "consumer_cancel_notify": True,
    "connection.blocked": True,
    "consumer_priorities": True,
    "authentication_failure_close": True,
    "per_consumer_qos": True,
    "direct_reply_to": True,
}

_PLATFORM = f"Python {sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"


@dataclass(frozen=True, slots=True)
class ConnectionConfig:
    """Limits and identity of one AMQP connection.

    ``channel_max``, ``frame_max`` and ``heartbeat_s`` are what connection.tune
    proposes; 0 means "no limit" (heartbeat 0: no heartbeats). ``client_address``
    is informational (the shell's ``authenticate`` callback closes over it to
    refuse ``guest`` from non-loopback addresses, as RabbitMQ does).
    """

    channel_max: int = 2047
    frame_max: int = 131072
    heartbeat_s: int = 60
    max_message_bytes: int = 134217728
    handshake_timeout_ms: int = 10000
    product: str = "logbroker"
    version: str = "0.1.0"
    platform: str = _PLATFORM
    cluster_name: str = "logbroker"
    copyright: str = "Copyright (c) the logbroker authors"
    information: str = "Licensed under the Apache License 2.0"
    client_address: str = ""
    mechanisms: str = AUTH_MECHANISMS
    # The user a verified client certificate names (its CN, or a SAN), for EXTERNAL.
    certificate_user: str | None = None
    # Where EXTERNAL finds the user in a certificate (logbroker.tls_options.peer_user_name).
    certificate_login_from: str = "common_name"
    certificate_login_san_type: str = "dns"

    def __post_init__(self) -> None:
        if not 0 <= self.channel_max <= 65535:
            raise ValueError(f"channel_max must be in 0..65535, got {self.channel_max}")
        if self.frame_max != 0 and not FRAME_MIN_SIZE <= self.frame_max <= 0xFFFFFFFF:
            raise ValueError(f"frame_max must be 0 or in 4096..2^32-1, got {self.frame_max}")
        if not 0 <= self.heartbeat_s <= 65535:
            raise ValueError(f"heartbeat_s must be in 0..65535, got {self.heartbeat_s}")
        if self.max_message_bytes < 0:
            raise ValueError("max_message_bytes must be >= 0")
        if self.handshake_timeout_ms <= 0:
            raise ValueError("handshake_timeout_ms must be > 0")


def server_properties(config: ConnectionConfig) -> common.FieldTable:
    """The ``server-properties`` table of connection.start."""
    capabilities: common.FieldTable = dict(SERVER_CAPABILITIES)
    return {
        "capabilities": capabilities,
        "cluster_name": config.cluster_name,
        "copyright": config.copyright,
        "information": config.information,
        "platform": config.platform,
        "product": config.product,
        "version": config.version,
    }
