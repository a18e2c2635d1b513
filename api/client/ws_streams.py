"""WebSocket streams: a consumer (subscribe with prefetch) and a following replay.

Both are async iterators and async context managers. When the connection is
lost they reconnect through the node ring: the consumer subscribes again (its
unacked deliveries were returned to the queue by the broker and come back
redelivered; acking a delivery of the lost connection does nothing), the
replay resumes at the offset after the last record it yielded.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from api.client.errors import ConnectionFailed, ProtocolError
from api.client.messages import Properties, Record, decode_body
from api.client.urls import NodeRing
from api.client.ws_connection import (
    CLOSE_TIMEOUT_S,
    WsConnection,
    error_frame,
    open_connection,
)

MAX_RECONNECTS = 10  # consecutive reconnects without progress before giving up


@dataclass(frozen=True)
class ReceivedMessage:
    """A message delivered to a WebSocket consumer."""

    consumer_tag: str
    delivery_tag: int
    queue: str
    offset: int | None
    redelivered: bool
    exchange: str
    routing_key: str
    properties: Properties
    body: bytes

    @staticmethod
    def fields(frame: Mapping[str, Any]) -> dict[str, Any]:
        try:
            offset = frame.get("offset")
            return {"consumer_tag": str(frame.get("consumer_tag", "")),
                    "delivery_tag": int(frame["delivery_tag"]),
                    "queue": str(frame.get("queue", "")),
                    "offset": None if offset is None else int(offset),
                    "redelivered": bool(frame.get("redelivered")),
                    "exchange": str(frame.get("exchange", "")),
                    "routing_key": str(frame.get("routing_key", "")),
                    "properties": dict(frame.get("properties") or {}),
                    "body": decode_body(frame.get("payload", ""),
                                        frame.get("payload_encoding"))}
        except (KeyError, TypeError, ValueError) as error:
            raise ProtocolError(f"a deliver frame is malformed: {error}") from error


def ack_frame(tag: int, multiple: bool) -> dict[str, Any]:
    return {"op": "ack", "delivery_tag": tag, "multiple": multiple}


def nack_frame(tag: int, multiple: bool, requeue: bool) -> dict[str, Any]:
    return {"op": "nack", "delivery_tag": tag, "multiple": multiple, "requeue": requeue}


def reject_frame(tag: int, requeue: bool) -> dict[str, Any]:
    return {"op": "reject", "delivery_tag": tag, "requeue": requeue}


@dataclass(frozen=True)
class Delivery(ReceivedMessage):
    """A delivery to settle with ack/nack/reject; each returns False if its connection is gone
    (the broker then redelivers the message)."""

    connection: WsConnection | None = field(default=None, repr=False, compare=False)

    async def ack(self, multiple: bool = False) -> bool:
        return await self._send(ack_frame(self.delivery_tag, multiple))

    async def nack(self, multiple: bool = False, requeue: bool = True) -> bool:
        return await self._send(nack_frame(self.delivery_tag, multiple, requeue))

    async def reject(self, requeue: bool = True) -> bool:
        return await self._send(reject_frame(self.delivery_tag, requeue))

    async def _send(self, frame: dict[str, Any]) -> bool:
        return self.connection is not None and await self.connection.try_send(frame)


class _Stream:
    """What both streams share: one connection, closing, and the context-manager protocol."""

    def __init__(self, ring: NodeRing, vhost: str, open_timeout: float) -> None:
        self._ring = ring
        self._vhost = vhost
        self._open_timeout = open_timeout
        self._connection: WsConnection | None = None
        self._closed = False
        self._failures = 0
        self.reconnects = 0

    async def _connect(self) -> WsConnection:
        return await open_connection(self._ring, self._vhost, self._open_timeout)

    async def _lost(self, error: ConnectionFailed) -> None:
        """The connection dropped: forget it (the next read reconnects through the ring), or
        give up if connecting failed (the ring was already tried) or it keeps dropping."""
        lost, self._connection = self._connection, None
        self._failures += 1
        if lost is None or self._failures > MAX_RECONNECTS:
            raise error
        self._ring.failed(lost.node)
        self.reconnects += 1

    _close_timeout = CLOSE_TIMEOUT_S

    async def close(self) -> None:
        self._closed = True
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close(self._close_timeout)

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.close()


class AsyncConsumer(_Stream):
    """`subscribe` on a WebSocket: iterate to get deliveries, settle each one."""

    def __init__(self, ring: NodeRing, vhost: str, queue: str, prefetch: int = 100,
                 no_ack: bool = False, consumer_tag: str | None = None,
                 arguments: Mapping[str, Any] | None = None, open_timeout: float = 10.0
                 ) -> None:
        super().__init__(ring, vhost, open_timeout)
        self.queue = queue
        self.consumer_tag = consumer_tag
        self._subscribe_frame: dict[str, Any] = {
            "op": "subscribe", "queue": queue, "prefetch": prefetch, "no_ack": no_ack}
        if consumer_tag:
            self._subscribe_frame["consumer_tag"] = consumer_tag
        if arguments:
            self._subscribe_frame["arguments"] = dict(arguments)
        self._early: deque[dict[str, Any]] = deque()

    async def __aenter__(self) -> AsyncConsumer:
        await self.start()
        return self

    def __aiter__(self) -> AsyncConsumer:
        return self

    async def start(self) -> None:
        """Connect and subscribe (iteration does it on its own when needed)."""
        if self._connection is not None or self._closed:
            return
        connection = await self._connect()
        try:
            await connection.send(self._subscribe_frame)
            while True:
                answer = await connection.receive()
                if answer.get("op") == "subscribed":
                    self.consumer_tag = str(answer.get("consumer_tag", self.consumer_tag))
                    self._subscribe_frame["consumer_tag"] = self.consumer_tag
                    break
                if answer.get("op") == "error":
                    raise error_frame(answer)
                if answer.get("op") == "deliver":
                    self._early.append(answer)
        except BaseException:
            await connection.close()
            raise
        self._connection = connection

    async def __anext__(self) -> Delivery:
        while True:
            if self._closed:
                raise StopAsyncIteration
            if self._early and self._connection is not None:
                return self._delivery(self._early.popleft(), self._connection)
            try:
                await self.start()
                assert self._connection is not None
                frame = await self._connection.receive()
            except ConnectionFailed as error:
                if self._closed:
                    raise StopAsyncIteration from None
                await self._lost(error)
                continue
            op = frame.get("op")
            if op == "deliver":
                self._failures = 0
                return self._delivery(frame, self._connection)
            if op == "cancelled":
                await self.close()
                raise StopAsyncIteration
            if op == "error":
                raise error_frame(frame)

    @staticmethod
    def _delivery(frame: Mapping[str, Any], connection: WsConnection) -> Delivery:
        return Delivery(**ReceivedMessage.fields(frame), connection=connection)

    async def cancel(self, timeout: float = 10.0) -> None:
        """Stop the deliveries (iteration ends) but keep the connection, so the deliveries
        received so far can still be settled; `close` then ends it (and the broker puts
        back what is left unacked, as it does for any delivery not received yet)."""
        connection, self._closed = self._connection, True
        if connection is None or not self.consumer_tag:
            return
        if not await connection.try_send({"op": "cancel", "consumer_tag": self.consumer_tag}):
            return
        try:
            async with asyncio.timeout(timeout):
                while (await connection.receive()).get("op") != "cancelled":
                    pass  # a delivery sent before the cancel: left unacked, put back on close
        except (TimeoutError, ConnectionFailed):
            pass


class AsyncReplayStream(_Stream):
    """`replay` on a WebSocket: the queue's log from an offset or a time; with `follow`,
    then every new record as it arrives. Ends at `to_offset` (exclusive) if given."""

    _close_timeout = 0.2  # nothing to flush: do not wait for a busy node to stop sending

    def __init__(self, ring: NodeRing, vhost: str, queue: str, from_offset: int | None = None,
                 from_timestamp: int | None = None, to_offset: int | None = None,
                 follow: bool = True, open_timeout: float = 10.0) -> None:
        if (from_offset is None) == (from_timestamp is None):
            raise ValueError("give exactly one of from_offset and from_timestamp")
        super().__init__(ring, vhost, open_timeout)
        self.queue = queue
        self.from_timestamp = from_timestamp
        self.to_offset = to_offset
        self.follow = follow
        self.next_offset: int | None = from_offset
        self.caught_up = False

    async def __aenter__(self) -> AsyncReplayStream:
        await self.start()
        return self

    def __aiter__(self) -> AsyncReplayStream:
        return self

    async def start(self) -> None:
        if self._connection is not None or self._closed:
            return
        frame: dict[str, Any] = {"op": "replay", "queue": self.queue, "follow": self.follow,
                                 "subscription": "replay"}
        if self.next_offset is not None:
            frame["from_offset"] = self.next_offset
        else:
            frame["from_timestamp"] = self.from_timestamp
        if self.to_offset is not None:
            frame["to_offset"] = self.to_offset
        connection = await self._connect()
        try:
            await connection.send(frame)
        except BaseException:
            await connection.close()
            raise
        self._connection = connection

    def _finished(self) -> bool:
        return self._closed or (self.to_offset is not None and self.next_offset is not None
                                and self.next_offset >= self.to_offset)

    async def __anext__(self) -> Record:
        while not self._finished():
            try:
                await self.start()
                assert self._connection is not None
                frame = await self._connection.receive()
            except ConnectionFailed as error:
                if self._closed:
                    break
                await self._lost(error)
                continue
            record = await self._on_frame(frame)
            if record is not None:
                return record
        await self.close()
        raise StopAsyncIteration

    async def _on_frame(self, frame: Mapping[str, Any]) -> Record | None:
        op = frame.get("op")
        if op == "record":
            record = Record.from_json(frame)
            if self.to_offset is not None and record.offset >= self.to_offset:
                await self.close()
                return None
            self._failures = 0
            self.next_offset = record.offset + 1
            return record
        if op == "caught_up":
            self.caught_up = True
            reported = frame.get("next_offset")
            if isinstance(reported, int) and (self.next_offset is None
                                              or reported > self.next_offset):
                self.next_offset = reported
            if not self.follow:
                await self.close()
        elif op == "replay_stopped":
            await self.close()
        elif op == "error":
            raise error_frame(frame)
        return None
