"""A small TCP proxy on 127.0.0.1 that a test can cut: `block()`, `unblock()`, `close()`.

Theory of operation. Each `TcpProxy` owns one thread running one asyncio loop.
It listens on a free 127.0.0.1 port (bound in the constructor, so `port` is
known at once) and, for every connection it accepts, dials the target and
pumps bytes both ways. An end of file in one direction is passed on as a
half close (the other direction keeps flowing), so a peer that finishes
writing and waits for the other side's FIN sees the same thing it would see
without the proxy; the pair is closed once both directions ended, or at once
when either side fails.

`block()` aborts every open connection (both sides get a reset, at once) and
makes the proxy close every new connection as soon as it is accepted, until
`unblock()`. `close()` blocks, stops listening, stops the loop and joins the
thread, bounded in time.

Bounds: reads are at most `CHUNK` bytes and every write waits for the
transport's buffer to drain below its high-water mark before the next read,
so at most about two chunks per direction are held; one task per direction
per connection; the thread ends on `close()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

CHUNK = 64 * 1024
DIAL_TIMEOUT_S = 2.0
CALL_TIMEOUT_S = 5.0
T = TypeVar("T")


class _Pair:
    """One proxied connection: the accepted side and the dialed side."""

    def __init__(self, client: asyncio.StreamWriter, server: asyncio.StreamWriter) -> None:
        self.client = client
        self.server = server
        self.tasks: list[asyncio.Task[None]] = []

    def abort(self) -> None:
        for writer in (self.client, self.server):
            writer.transport.abort()
        for task in self.tasks:
            task.cancel()


class TcpProxy:
    def __init__(self, target_port: int, name: str = "", target_host: str = "127.0.0.1"
                 ) -> None:
        self.name = name or f"proxy->{target_port}"
        self.target = (target_host, target_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port: int = self._listener.getsockname()[1]
        self.blocked = False
        self.accepted = 0  # connections accepted and forwarded (not those refused)
        self.refused = 0  # connections closed at once while blocked, or the dial failed
        self._pairs: set[_Pair] = set()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"tcp-proxy {self.name}",
                                        daemon=True)
        self._thread.start()
        self._call(self._serve())

    # ------------------------------------------------------------ the API

    def block(self) -> None:
        """Abort every open connection; close new ones at once until `unblock()`."""
        self._call(self._block())

    def unblock(self) -> None:
        self._call(self._unblock())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CALL_TIMEOUT_S)
        if not self._thread.is_alive():
            self._loop.close()
        self._listener.close()

    @property
    def open_connections(self) -> int:
        return len(self._pairs)

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------- the loop

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _call(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(CALL_TIMEOUT_S)

    async def _serve(self) -> None:
        self._server = await asyncio.start_server(self._accepted, sock=self._listener,
                                                  limit=CHUNK)

    async def _block(self) -> None:
        self.blocked = True
        for pair in list(self._pairs):
            pair.abort()
        self._pairs.clear()

    async def _unblock(self) -> None:
        self.blocked = False

    async def _shutdown(self) -> None:
        await self._block()
        if self._server is not None:
            self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), CALL_TIMEOUT_S)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                        ) -> None:
        if self.blocked:
            self.refused += 1
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(*self.target, limit=CHUNK), DIAL_TIMEOUT_S)
        except (TimeoutError, OSError):
            self.refused += 1
            writer.transport.abort()
            return
        if self.blocked:  # blocked while dialing
            self.refused += 1
            writer.transport.abort()
            up_writer.transport.abort()
            return
        self.accepted += 1
        pair = _Pair(writer, up_writer)
        self._pairs.add(pair)
        pair.tasks = [asyncio.ensure_future(self._pump(reader, up_writer, pair)),
                      asyncio.ensure_future(self._pump(up_reader, writer, pair))]
        try:
            await asyncio.gather(*pair.tasks)
        except (asyncio.CancelledError, Exception):
            pair.abort()
        finally:
            self._pairs.discard(pair)
            for side in (writer, up_writer):
                side.transport.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    pair: _Pair) -> None:
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                writer.write(data)
                await writer.drain()
            if writer.can_write_eof() and not writer.transport.is_closing():
                writer.write_eof()  # a half close, passed on
        except (ConnectionError, OSError):
            pair.abort()  # a reset on one side resets the other
