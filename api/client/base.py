"""What the async and the sync client share: settings, failover bookkeeping, batching."""

from __future__ import annotations

import ssl
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import httpx

from api.client.calls import MAX_BATCH, Call
from api.client.errors import ConnectionFailed, InvalidUrl
from api.client.messages import OutgoingMessage, Properties
from api.client.urls import Node, NodeRing, parse_url, parse_urls
from api.client.ws_connection import describe, unreachable

CONNECT_TIMEOUT_S = 5.0
LEADER_URL_HEADER = "X-Queue-Leader-Url"
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


class ClientBase:
    """Nodes, the default vhost, and the rules for moving to another node."""

    def __init__(self, urls: str | Sequence[str] | None = None, *, vhost: str = "/",
                 timeout: float = 30.0, rounds: int = 2, backoff_s: float = 0.1,
                 tls: ssl.SSLContext | None = None) -> None:
        self.nodes: list[Node] = parse_urls(urls)
        self.vhost = vhost
        self.timeout = timeout
        self._ring = NodeRing(self.nodes, rounds=rounds, backoff_s=backoff_s, tls=tls)

    @property
    def _verify(self) -> ssl.SSLContext | bool:
        """What httpx checks https:// nodes with (True: the system's CAs)."""
        return self._ring.tls if self._ring.tls is not None else True

    def _timeouts(self) -> httpx.Timeout:
        """Connecting is bounded more tightly: a node that does not answer is skipped soon."""
        return httpx.Timeout(self.timeout, connect=min(self.timeout, CONNECT_TIMEOUT_S))

    @property
    def _probe_timeout(self) -> float:
        return min(self.timeout, CONNECT_TIMEOUT_S)

    @property
    def current_node(self) -> Node:
        return self._ring.current

    def _vhost(self, vhost: str | None) -> str:
        return self.vhost if vhost is None else vhost

    def _transport_failed(self, call: Call[Any], node: Node, error: httpx.TransportError,
                          problems: list[str]) -> None:
        """Note a failed attempt; raise if retrying elsewhere could do the request twice."""
        problems.append(f"{node}: {describe(error)}")
        if not call.idempotent and not isinstance(error, NOT_SENT):
            raise ConnectionFailed(
                f"lost the connection to {node} during {call.method} {call.path}; "
                f"the outcome is unknown ({describe(error)})") from error
        self._ring.failed(node)

    @staticmethod
    def _redirect(response: httpx.Response, node: Node) -> Node | None:
        """The queue's leader node, when `node` answered 421 naming it (a replay asked of
        a node that has no readable copy of the queue); same credentials. Followed once
        per request: a leader that moved again is found by the next request."""
        url = response.headers.get(LEADER_URL_HEADER)
        if response.status_code != 421 or not url:
            return None
        try:
            target = parse_url(url)
        except InvalidUrl:
            return None
        return Node(target.base_url, node.user, node.password)

    @staticmethod
    def _unreachable(problems: list[str]) -> ConnectionFailed:
        return unreachable(problems)


def listing_filter(kind: str, items: list[dict[str, Any]], vhost: str | None
                   ) -> list[dict[str, Any]]:
    """Connections and consumers come for every vhost: keep those of `vhost` (None: all)."""
    if vhost is None or kind not in ("connections", "consumers"):
        return items
    if kind == "connections":
        return [item for item in items if item.get("vhost") == vhost]
    return [item for item in items if (item.get("queue") or {}).get("vhost") == vhost]


def outgoing(messages: Iterable[OutgoingMessage | bytes | str], routing_key: str,
             properties: Properties | None) -> Iterator[OutgoingMessage]:
    for message in messages:
        if isinstance(message, OutgoingMessage):
            yield message
        else:
            yield OutgoingMessage(routing_key, message, properties)


def batches(exchange: str, messages: Iterable[OutgoingMessage], batch_size: int
            ) -> Iterator[tuple[str, list[OutgoingMessage]]]:
    """Consecutive messages for the same exchange, at most `batch_size` per request."""
    size = max(1, min(batch_size, MAX_BATCH))
    current: list[OutgoingMessage] = []
    current_exchange = exchange
    for message in messages:
        target = exchange if message.exchange is None else message.exchange
        if current and (target != current_exchange or len(current) >= size):
            yield current_exchange, current
            current = []
        current_exchange = target
        current.append(message)
    if current:
        yield current_exchange, current

