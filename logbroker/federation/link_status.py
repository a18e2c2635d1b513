"""`LinkStatus`: what `/api/federation-links` says of one link (RabbitMQ's fields)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from logbroker.federation.link_plan import LinkKey


@dataclass
class LinkStatus:
    key: LinkKey | None  # None: a shovel
    upstream: str  # the upstream's name, or the shovel's
    upstream_exchange: str
    since_ms: int
    state: str = "starting"  # starting | running | error | terminated (a shovel done)
    uri: str = ""  # the upstream URI in use, password hidden
    error: str = ""  # the last error, kept after a reconnect for the record
    messages: int = 0  # messages taken from the upstream since the link started

    def starting(self, now_ms: int, uri: str) -> None:
        self.state, self.since_ms, self.uri = "starting", now_ms, uri

    def running(self, now_ms: int) -> None:
        self.state, self.since_ms = "running", now_ms

    def failed(self, now_ms: int, uri: str, error: str) -> None:
        self.state, self.since_ms, self.uri, self.error = "error", now_ms, uri, error

    def terminated(self, now_ms: int) -> None:
        self.state, self.since_ms = "terminated", now_ms

    def moved(self, count: int) -> None:
        self.messages += count

    def view(self, node: str) -> dict[str, Any]:
        assert self.key is not None
        view: dict[str, Any] = {
            "node": node, "vhost": self.key.vhost, "exchange": self.key.exchange,
            "upstream_exchange": self.upstream_exchange, "type": "exchange",
            "upstream": self.upstream, "uri": self.uri, "status": self.state,
            "timestamp": self.since_ms, "messages": self.messages,
        }
        if self.error:
            view["error"] = self.error
        return view
