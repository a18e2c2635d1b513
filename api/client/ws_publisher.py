"""High-throughput publishing over a WebSocket, with confirms.

Messages are buffered and sent many per `publish` frame (`max_batch`); up to
`max_in_flight` frames are sent before their confirms come back. `publish`
returns a future that resolves to the message's `PublishResult` (a nack or an
error frame naming the message gives `confirmed=False` and the reason); a
partly filled frame goes out after `linger_s`, or on `flush`. If the
connection is lost, unconfirmed messages fail with `ConnectionFailed` (their
outcome is unknown: republish them for at-least-once) and the next publish
connects again, to the next node if this one is down.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from api.client.errors import ConnectionFailed, LogbrokerError
from api.client.messages import OutgoingMessage, Properties, PublishResult
from api.client.urls import NodeRing
from api.client.ws_connection import WsConnection, error_frame, open_connection

Pending = tuple[int, "asyncio.Future[PublishResult]"]  # (frame number, the message's future)


class AsyncPublisher:
    """Publish over one WebSocket; use as `async with client.publisher() as publisher:`."""

    def __init__(self, ring: NodeRing, vhost: str, max_batch: int = 1000,
                 max_in_flight: int = 8, linger_s: float = 0.002,
                 open_timeout: float = 10.0) -> None:
        if max_batch < 1 or max_in_flight < 1:
            raise ValueError("max_batch and max_in_flight must be at least 1")
        self._ring, self._vhost, self._open_timeout = ring, vhost, open_timeout
        self.max_batch, self.max_in_flight, self.linger_s = max_batch, max_in_flight, linger_s
        self._connection: WsConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._linger: asyncio.Task[None] | None = None
        self._slots = asyncio.Semaphore(max_in_flight)
        self._send_lock = asyncio.Lock()
        self._buffer: list[tuple[dict[str, Any], asyncio.Future[PublishResult]]] = []
        self._pending: dict[str, Pending] = {}
        self._frames: dict[int, int] = {}  # frame number -> messages not yet settled
        self._ids = itertools.count(1)
        self._frame_numbers = itertools.count(1)
        self._closing = False

    async def __aenter__(self) -> AsyncPublisher:
        await self.open()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.close()

    async def open(self) -> WsConnection:
        if self._connection is None:
            connection = await open_connection(self._ring, self._vhost, self._open_timeout)
            self._slots = asyncio.Semaphore(self.max_in_flight)
            self._connection = connection
            self._reader = asyncio.create_task(self._read(connection))
        return self._connection

    async def publish(self, exchange: str, routing_key: str, body: bytes | str,
                      properties: Properties | None = None) -> asyncio.Future[PublishResult]:
        """Queue one message; the future resolves once it is confirmed or refused."""
        if self._closing:
            raise ConnectionFailed("the publisher is closed")
        future: asyncio.Future[PublishResult] = asyncio.get_running_loop().create_future()
        message = OutgoingMessage(routing_key, body, properties).wire()
        message.update({"id": next(self._ids), "exchange": exchange})
        self._buffer.append((message, future))
        if len(self._buffer) >= self.max_batch:
            await self._send_some()
        elif self._linger is None:
            self._linger = asyncio.create_task(self._send_later())
        return future

    async def publish_many(self, messages: Iterable[OutgoingMessage], exchange: str = ""
                           ) -> list[PublishResult]:
        """Publish every message and wait for all the confirms (ConnectionFailed if lost)."""
        futures = [await self.publish(exchange if m.exchange is None else m.exchange,
                                      m.routing_key, m.body, m.properties) for m in messages]
        while self._buffer:
            await self._send_some()
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return [outcome for outcome in outcomes if isinstance(outcome, PublishResult)]

    async def flush(self) -> None:
        """Send everything buffered and wait until every message sent so far is settled."""
        while self._buffer:
            await self._send_some()
        async with self._send_lock:
            pending = [future for _, future in self._pending.values()]
        if pending:
            await asyncio.wait(pending)

    async def close(self) -> None:
        try:
            await self.flush()
        finally:
            self._closing = True
            if self._linger is not None:
                self._linger.cancel()
            connection, self._connection = self._connection, None
            if connection is not None:
                await connection.close()
            if self._reader is not None:
                await asyncio.gather(self._reader, return_exceptions=True)

    @property
    def unconfirmed(self) -> int:
        return len(self._pending) + len(self._buffer)

    async def _send_later(self) -> None:
        await asyncio.sleep(self.linger_s)
        self._linger = None
        while self._buffer and not self._closing:
            await self._send_some()

    async def _send_some(self) -> None:
        """Send up to max_batch buffered messages as one frame, once a slot is free."""
        async with self._send_lock:
            batch = self._buffer[:self.max_batch]
            del self._buffer[:self.max_batch]
            if not batch:
                return
            number = next(self._frame_numbers)
            try:
                connection = await self.open()
                await self._slots.acquire()
                self._frames[number] = len(batch)
                for message, future in batch:
                    self._pending[str(message["id"])] = (number, future)
                await connection.send({"op": "publish", "messages": [m for m, _ in batch]})
            except LogbrokerError as error:
                self._drop_frame(number, batch, error)
        if self._buffer and self._linger is None and not self._closing:
            self._linger = asyncio.create_task(self._send_later())

    def _drop_frame(self, number: int,
                    batch: list[tuple[dict[str, Any], asyncio.Future[PublishResult]]],
                    error: LogbrokerError) -> None:
        """A frame that could not be sent: its messages fail, its slot is freed."""
        for message, future in batch:
            self._pending.pop(str(message["id"]), None)
            if not future.done():
                future.set_exception(error)
        if self._frames.pop(number, None) is not None:
            self._slots.release()

    def _settle(self, message_id: Any, result: PublishResult) -> None:
        found = self._pending.pop(str(message_id), None)
        if found is None:
            return
        number, future = found
        if not future.done():
            future.set_result(result)
        self._frames[number] -= 1
        if self._frames[number] <= 0:
            del self._frames[number]
            self._slots.release()

    def _on_confirm(self, frame: Mapping[str, Any]) -> None:
        unroutable = {str(i) for i in frame.get("unroutable") or []}
        for message_id in frame.get("ids") or []:
            self._settle(message_id, PublishResult(str(message_id) not in unroutable, True))
        for nack in frame.get("nacks") or []:
            if isinstance(nack, Mapping):
                self._settle(nack.get("id"),
                             PublishResult(False, False, str(nack.get("reason") or "nacked")))
        for message_id in unroutable:
            self._settle(message_id, PublishResult(False, True))

    def _on_error(self, frame: Mapping[str, Any]) -> None:
        """An error naming a message refuses it; one naming nothing refuses the oldest frame."""
        reason = str(error_frame(frame))
        ref = frame.get("ref")
        if ref is not None and str(ref) in self._pending:
            self._settle(ref, PublishResult(False, False, reason))
            return
        if self._frames:
            oldest = min(self._frames)
            for message_id, (number, _) in list(self._pending.items()):
                if number == oldest:
                    self._settle(message_id, PublishResult(False, False, reason))

    async def _read(self, connection: WsConnection) -> None:
        try:
            while True:
                frame = await connection.receive()
                if frame.get("op") == "confirm":
                    self._on_confirm(frame)
                elif frame.get("op") == "error":
                    self._on_error(frame)
        except LogbrokerError as error:
            self._fail_all(connection, error)

    def _fail_all(self, connection: WsConnection, error: LogbrokerError) -> None:
        if self._connection is connection:
            self._connection = None
            if not self._closing:
                self._ring.failed(connection.node)
        lost: LogbrokerError = error
        if isinstance(error, ConnectionFailed):
            lost = ConnectionFailed(f"{error}; {len(self._pending)} messages unconfirmed")
        for _, future in self._pending.values():
            if not future.done():
                future.set_exception(lost)
        self._pending.clear()
        for _ in self._frames:
            self._slots.release()
        self._frames.clear()
