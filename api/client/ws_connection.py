"""A WebSocket of JSON frames to one node, opened with failover over the node ring.

Authentication is HTTP basic on the upgrade request. A refused handshake
(4xx) or a close code 4xxx (e.g. 4401, bad credentials) is the broker saying
no: it raises the matching `LogbrokerError` and is not retried elsewhere. A
connection that cannot be opened, or is lost, raises `ConnectionFailed`:
callers reconnect through the ring.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from api.client.errors import (
    ConnectionFailed,
    LogbrokerError,
    ProtocolError,
    error_for,
    error_from_response,
)
from api.client.urls import Node, NodeRing

MAX_FRAME_BYTES = 256 << 20  # a 128 MiB body in base64, with room for the JSON around it
CLOSE_TIMEOUT_S = 2.0


class WsConnection:
    """One open WebSocket; frames are JSON objects."""

    def __init__(self, socket: ClientConnection, node: Node) -> None:
        self.socket = socket
        self.node = node

    async def send(self, frame: Mapping[str, Any]) -> None:
        try:
            await self.socket.send(json.dumps(frame, separators=(",", ":")))
        except ConnectionClosed as closed:
            raise closed_error(closed, self.node) from closed

    async def try_send(self, frame: Mapping[str, Any]) -> bool:
        """Send unless the connection is gone (then False)."""
        try:
            await self.send(frame)
        except ConnectionFailed:
            return False
        return True

    async def receive(self) -> dict[str, Any]:
        try:
            text = await self.socket.recv()
        except ConnectionClosed as closed:
            raise closed_error(closed, self.node) from closed
        try:
            frame = json.loads(text)
        except ValueError as error:
            raise ProtocolError(f"{self.node} sent a frame that is not JSON") from error
        if not isinstance(frame, dict):
            raise ProtocolError(f"{self.node} sent a frame that is not a JSON object")
        return frame

    async def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """Close cleanly, or abort if the closing handshake takes longer than `timeout`
        (it cannot finish while the node is still pushing frames this side does not read)."""
        try:
            async with asyncio.timeout(timeout):
                await self.socket.close()
        except TimeoutError:
            self.socket.transport.abort()


def closed_error(closed: ConnectionClosed, node: Node) -> LogbrokerError:
    """A close code 4xxx is the broker's refusal (status xxx); anything else a lost connection."""
    frame = closed.rcvd
    if frame is not None and 4400 <= frame.code < 4600:
        return error_for(frame.code - 4000, frame.reason or f"closed with code {frame.code}")
    code = f" (code {frame.code}{': ' + frame.reason if frame.reason else ''})" if frame else ""
    return ConnectionFailed(f"connection to {node} closed{code}")


def error_frame(frame: Mapping[str, Any]) -> LogbrokerError:
    """The exception for an `{"op": "error", "code", "reason"}` frame."""
    code = frame.get("code")
    return error_for(code if isinstance(code, int) else 400, str(frame.get("reason") or ""))


async def open_connection(ring: NodeRing, vhost: str, open_timeout: float = 10.0
                          ) -> WsConnection:
    """Connect to the current node, else the next ones; ConnectionFailed if none answers."""
    problems: list[str] = []
    for attempt, node in enumerate(ring.attempts()):
        try:
            socket = await connect(
                node.ws_url(vhost), additional_headers={"Authorization": node.authorization},
                max_size=MAX_FRAME_BYTES, compression=None, open_timeout=open_timeout,
                ssl=ring.tls if node.base_url.startswith("https:") else None,
                ping_interval=20, ping_timeout=20, close_timeout=CLOSE_TIMEOUT_S,
                user_agent_header="logbroker-client")
            return WsConnection(socket, node)
        except InvalidStatus as error:
            status = error.response.status_code
            if 400 <= status < 500:
                refusal = error_from_response(status, bytes(error.response.body))
                refusal.reason = f"WebSocket refused by {node}: {refusal.reason}"
                raise refusal from error
            problems.append(f"{node}: HTTP {status}")
        except (OSError, TimeoutError, InvalidHandshake) as error:
            problems.append(f"{node}: {describe(error)}")
        ring.failed(node)
        await asyncio.sleep(ring.pause_after(attempt))
    raise unreachable(problems)


def unreachable(problems: list[str]) -> ConnectionFailed:
    """The error once every node was tried: what went wrong with each (once each)."""
    distinct = list(dict.fromkeys(problems))
    return ConnectionFailed(f"cannot connect to any node ({'; '.join(distinct[-4:])})")


def describe(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text.split("\n", 1)[0]
