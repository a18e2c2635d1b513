"""Serve the HTTP app with uvicorn inside the broker's own event loop.

We bind the socket ourselves so a busy port is an `OSError` here (uvicorn
would `sys.exit`), and keep uvicorn away from signal handlers: the broker's
composition root owns SIGTERM and stops us through `stop`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Iterator

import uvicorn

from api.http.api_context import ApiContext
from api.http.app import create_app
from api.http.routes.data_plane import expire_leases

logger = logging.getLogger(__name__)
LEASE_POLL_S = 0.1


class _EmbeddedServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _listening_socket(host: str, port: int) -> socket.socket:
    """A TCP listening socket whose protocol is IPPROTO_TCP, not 0.

    asyncio sets TCP_NODELAY only on sockets whose `proto` says TCP; with
    `socket.create_server` (proto 0) every response whose headers and body go out
    in two writes would wait out the client's 40 ms delayed ACK (Nagle).
    """
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP,
        flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    return sock


class HttpServer:
    def __init__(self, context: ApiContext, host: str, port: int,
                 tls: ssl.SSLContext | None = None) -> None:
        self.context = context
        self._sock = _listening_socket(host, port)
        self.port = self._sock.getsockname()[1]
        config = uvicorn.Config(create_app(context), lifespan="off", log_level="warning",
                                access_log=False, ws_max_size=16 << 20,
                                # The websockets library's Sans-I/O core: uvicorn's older
                                # `websockets` protocol is deprecated (and warned at start).
                                ws="websockets-sansio",
                                timeout_graceful_shutdown=2, ws_ping_interval=20,
                                # Compressing every frame costs both ends more CPU than
                                # the loopback or LAN bandwidth it saves.
                                ws_per_message_deflate=False,
                                # HTTPS and WSS: the node's own context (its TLS options),
                                # not one uvicorn would build from file names.
                                ssl_context_factory=None if tls is None
                                else lambda _config, _default: tls)
        self._server = _EmbeddedServer(config)
        self._task: asyncio.Task[None] | None = None
        self._timers: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._task = asyncio.ensure_future(self._server.serve(sockets=[self._sock]))
        self._timers = [asyncio.ensure_future(self._expire_leases())]
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises why it could not start
                raise RuntimeError("the HTTP server stopped while starting")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._sock.close()

    async def _expire_leases(self) -> None:
        """Requeue REST leases whose visibility timeout passed (redelivered=true)."""
        while True:
            clock = self.context.clock
            expire_leases(self.context, clock.wall_ms())
            deadline = self.context.leases.next_deadline_ms()
            wait_s = LEASE_POLL_S if deadline is None else (deadline - clock.wall_ms()) / 1000
            await asyncio.sleep(min(max(wait_s, 0.005), LEASE_POLL_S))


async def start_http_server(context: ApiContext, host: str, port: int,
                            tls: ssl.SSLContext | None = None) -> HttpServer:
    server = HttpServer(context, host, port, tls)
    await server.start()
    logger.info("%s API on %s:%d (docs at /docs)", "HTTPS" if tls else "HTTP", host,
                server.port)
    return server
