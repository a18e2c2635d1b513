"""The AMQP 0-9-1 listener: an asyncio TCP server with one connection handler per client.

:func:`start_amqp_server` listens; every accepted socket gets a
:class:`~api.amqp.connection_handler.ConnectionHandler`, whose task runs the
connection (see there). The listener's connections share the direct reply-to
names and one output round, and each is told of resource alarms.
:func:`stop_amqp_server` closes every connection with 320 CONNECTION_FORCED.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import weakref
from dataclasses import replace

from api.amqp.connection_handler import ConnectionHandler
from api.amqp.direct_reply import DirectReplyRegistry
from api.amqp.output_round import OutputRound
from api.amqp.reply_texts import reply_text
from api.amqp.server_properties import TLS_AUTH_MECHANISMS, ConnectionConfig
from logbroker.broker import Broker
from logbroker.cluster_name import cluster_name
from logbroker.metadata.reply_codes import ReplyCode
from segments.clock import SYSTEM_CLOCK, Clock

logger = logging.getLogger(__name__)

__all__ = ["AmqpServerConfig", "start_amqp_server", "stop_amqp_server"]

# A client that opens a TLS connection and never finishes the handshake is dropped.
HANDSHAKE_TIMEOUT_S = 10.0
DEFAULT_MAX_PENDING_HANDSHAKES = 1000
SHUTDOWN_TEXT = "broker forced connection closure with reason 'shutdown'"

_handlers: weakref.WeakKeyDictionary[asyncio.Server, set[ConnectionHandler]] = (
    weakref.WeakKeyDictionary()
)


#: The listener's per-connection settings (tune values, limits): the machine's own config.
AmqpServerConfig = ConnectionConfig


async def start_amqp_server(
    broker: Broker, host: str, port: int, config: ConnectionConfig | None = None,
    tls: ssl.SSLContext | None = None, clock: Clock = SYSTEM_CLOCK,
    max_pending_handshakes: int = DEFAULT_MAX_PENDING_HANDSHAKES, reuse_port: bool = False,
) -> asyncio.Server:
    """Listen for AMQP clients on ``host:port`` (port 0: any free port); with `tls`,
    AMQPS: every accepted socket does a TLS handshake first. At most
    `max_pending_handshakes` connections may be between accept and connection.open-ok
    (each for at most the handshake timeout): more are dropped at once, so clients that
    never log in cannot hold the node's sockets and memory. `reuse_port`: SO_REUSEPORT,
    so the workers of one node share the port (the kernel spreads the accepts)."""
    if config is None:
        config = ConnectionConfig(max_message_bytes=broker.config.max_message_bytes)
    if tls is not None and tls.verify_mode != ssl.CERT_NONE:
        config = replace(config, mechanisms=TLS_AUTH_MECHANISMS)
    live: set[ConnectionHandler] = set()
    serial = itertools.count(1)
    replies = DirectReplyRegistry()  # reply names are valid across the listener's connections
    output_round = OutputRound()

    pending = PendingHandshakes(max_pending_handshakes)

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # The cluster's name as it is now (a member may have joined since the last one).
        named = replace(config, cluster_name=cluster_name(broker.state, broker.config.node_name))
        handler = ConnectionHandler(broker, named, reader, writer, next(serial), replies,
                                    output_round, clock)
        if not pending.admit(handler):
            writer.transport.abort()
            return
        live.add(handler)
        try:
            await handler.run()
        finally:
            live.discard(handler)
            pending.discard(handler)

    def on_alarm(active: frozenset[str]) -> None:
        reason = broker.resources.alarms.reason
        for handler in list(live):
            handler.resource_alarm(bool(active), reason)

    broker.resources.subscribe(on_alarm)
    if tls is None:
        server = await asyncio.start_server(on_client, host, port,
                                            reuse_port=reuse_port or None)
    else:
        server = await asyncio.start_server(on_client, host, port, ssl=tls,
                                            ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S,
                                            reuse_port=reuse_port or None)
    _handlers[server] = live
    return server


class PendingHandshakes:
    """The listener's connections that have not opened yet, up to a limit. Opened ones
    are pruned lazily, when the set is full: an accept costs O(1) until then."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._handlers: set[ConnectionHandler] = set()
        self._refusing = False

    def admit(self, handler: ConnectionHandler) -> bool:
        if len(self._handlers) >= self.limit:
            self._handlers = {h for h in self._handlers if not h.opened}
        if len(self._handlers) >= self.limit:
            if not self._refusing:  # once per burst, not once per socket
                logger.warning("%d AMQP connections have not finished their handshake: "
                               "new ones are dropped until some do", self.limit)
            self._refusing = True
            return False
        self._refusing = False
        self._handlers.add(handler)
        return True

    def discard(self, handler: ConnectionHandler) -> None:
        self._handlers.discard(handler)


async def stop_amqp_server(server: asyncio.Server, timeout_s: float = 2.0) -> None:
    """Stop listening, close every connection (320 CONNECTION_FORCED), wait for them."""
    server.close()
    handlers = list(_handlers.get(server, ()))
    for handler in handlers:
        handler.force_close(reply_text(ReplyCode.CONNECTION_FORCED, SHUTDOWN_TEXT))
    tasks = [handler.task for handler in handlers if handler.task is not None]
    if tasks:
        _done, pending = await asyncio.wait(tasks, timeout=timeout_s)
        for handler in handlers:
            if handler.task in pending:
                handler.abort()
        if pending:
            await asyncio.wait(pending, timeout=timeout_s)
    await server.wait_closed()
