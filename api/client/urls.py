"""Broker addresses and failover order.

A client takes one or more base URLs `http://USER:PASS@HOST:PORT` (a string
with commas, or a list). Without credentials a URL uses guest/guest; without a
port, 15672 (443 for https). `LOGBROKER_URL` gives the same list; the default
is the local node. `NodeRing` keeps the node in use and moves to the next one
when a connection fails, with bounded attempts and a short backoff after each
full round of nodes.
"""

from __future__ import annotations

import base64
import os
import ssl
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

from api.client.errors import InvalidUrl

ENV_VAR = "LOGBROKER_URL"
DEFAULT_URL = "http://guest:guest@127.0.0.1:15672"
DEFAULT_PORT = 15672


@dataclass(frozen=True)
class Node:
    """One node: its base URL without credentials, and the credentials to use."""

    base_url: str
    user: str = "guest"
    password: str = "guest"

    @property
    def auth(self) -> tuple[str, str]:
        return (self.user, self.password)

    @property
    def authorization(self) -> str:
        token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode("ascii")
        return f"Basic {token}"

    def ws_url(self, vhost: str) -> str:
        scheme, rest = self.base_url.split("://", 1)
        return f"{'wss' if scheme == 'https' else 'ws'}://{rest}/ws?vhost={quote(vhost, safe='')}"

    def __str__(self) -> str:
        return self.base_url


def parse_url(text: str) -> Node:
    """One URL -> Node; InvalidUrl when it cannot be a broker address."""
    raw = text.strip()
    if "://" not in raw:
        raw = f"http://{raw}"
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as error:
        raise InvalidUrl(f"invalid broker URL {_redact(text)!r}: {error}") from error
    if parts.scheme not in ("http", "https"):
        raise InvalidUrl(f"invalid broker URL {_redact(text)!r}: the scheme must be http or https")
    if not parts.hostname:
        raise InvalidUrl(f"invalid broker URL {_redact(text)!r}: no host")
    if parts.query or parts.fragment:
        raise InvalidUrl(f"invalid broker URL {_redact(text)!r}: no query or fragment allowed")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is None:
        port = 443 if parts.scheme == "https" else DEFAULT_PORT
    base = f"{parts.scheme}://{host}:{port}{parts.path.rstrip('/')}"
    user = unquote(parts.username) if parts.username is not None else "guest"
    password = unquote(parts.password) if parts.password is not None else "guest"
    return Node(base, user, password)


def _redact(text: str) -> str:
    """The URL without its password, for messages."""
    scheme, sep, rest = text.partition("://")
    if not sep or "@" not in rest.split("/", 1)[0]:
        return text
    userinfo, _, host = rest.partition("@")
    return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{host}"


def parse_urls(spec: str | Sequence[str] | None = None,
               environ: Mapping[str, str] | None = None) -> list[Node]:
    """Nodes from a comma-separated string or a list; None reads LOGBROKER_URL, else the default."""
    if spec is None:
        spec = (os.environ if environ is None else environ).get(ENV_VAR) or DEFAULT_URL
    items = spec.split(",") if isinstance(spec, str) else [
        part for entry in spec for part in entry.split(",")]
    nodes = [parse_url(item) for item in items if item.strip()]
    if not nodes:
        raise InvalidUrl("no broker URL given")
    return nodes


class NodeRing:
    """The nodes in failover order: the current node first, then the others in turn."""

    def __init__(self, nodes: Sequence[Node], rounds: int = 2, backoff_s: float = 0.1,
                 max_backoff_s: float = 1.0, tls: ssl.SSLContext | None = None) -> None:
        if not nodes:
            raise InvalidUrl("no broker URL given")
        self.nodes = list(nodes)
        self.tls = tls  # how https:// and wss:// nodes are checked (None: the defaults)
        self.rounds = max(1, rounds)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._current = 0

    @property
    def current(self) -> Node:
        return self.nodes[self._current]

    def attempts(self) -> Iterator[Node]:
        """Nodes to try, current first: `rounds` times around the ring at most."""
        start = self._current
        for attempt in range(len(self.nodes) * self.rounds):
            yield self.nodes[(start + attempt) % len(self.nodes)]

    def failed(self, node: Node) -> None:
        """`node` could not be reached: the next node becomes current (if it was current)."""
        if self.nodes[self._current] == node:
            self._current = (self._current + 1) % len(self.nodes)

    def pause_after(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number `attempt` (0-based): a backoff
        that doubles after each full round of nodes, none between nodes of a round."""
        if (attempt + 1) % len(self.nodes) != 0:
            return 0.0
        completed_round = (attempt + 1) // len(self.nodes)
        if completed_round >= self.rounds:
            return 0.0
        return float(min(self.backoff_s * 2 ** (completed_round - 1), self.max_backoff_s))
