"""The client connections and channels other cluster members hold, for the management
API: `/api/connections`, `/api/channels` and closing a connection list and reach every
node's, as RabbitMQ's management plugin does.

A node holds only its own clients' connections (under `serve --workers N` the kernel
spreads them over the workers, which share the ports). A listing asks every other
member that is up once, all in parallel, with a timeout (`m.views`): a silent member's
connections are left out, never waited for. Each member answers with the views it
would show the same user itself (`ViewRequest`), at most `MAX_VIEWS` of them. Closing
a connection another member holds is forwarded to it (`m.close`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from logbroker.cluster.cluster_rpc import ClusterRpc
from logbroker.cluster.envelope import Envelope
from logbroker.errors import BrokerError
from logbroker.queue_figures import FIGURES_TIMEOUT_S

MAX_VIEWS = 10_000  # per member and request: an answer stays one bounded frame
TIMEOUT_S = FIGURES_TIMEOUT_S  # as long as a member may take with its queue figures

# {"kind": "connections" | "channels" | "totals" (their counts), "user", "all" (sees
# every vhost's), "vhost" (or None), "connection" (a name, or None), "rates" (the
# RateQuery's ages and increments)}
ViewRequest = dict[str, Any]
LocalViews = Callable[[ViewRequest], list[dict[str, Any]]]
LocalClose = Callable[[str, str], bool]  # (connection name, reason) -> held here, closed


class PeerViews:
    """Asks the other members for their views, and answers theirs with this node's."""

    def __init__(self, rpc: ClusterRpc, node_name: str,
                 members_up: Callable[[], list[str]]) -> None:
        self._rpc = rpc
        self._node_name = node_name
        self._members_up = members_up

    def answer_with(self, views: LocalViews, close: LocalClose) -> None:
        async def on_views(_peer: str, envelope: Envelope) -> Envelope:
            return Envelope("ok", {"views": views(envelope.header)[:MAX_VIEWS]})

        async def on_close(_peer: str, envelope: Envelope) -> Envelope:
            closed = close(str(envelope.header.get("name")), str(envelope.header.get("reason")))
            return Envelope("ok", {"closed": closed})

        self._rpc.handle("m.views", on_views)
        self._rpc.handle("m.close", on_close)

    async def gather(self, request: ViewRequest) -> list[dict[str, Any]]:
        """Every other member's views (those that answered in time)."""
        peers = [name for name in self._members_up() if name != self._node_name]
        answers = await asyncio.gather(*(self._ask(peer, request) for peer in peers))
        return [view for views in answers for view in views]

    async def _ask(self, peer: str, request: ViewRequest) -> list[dict[str, Any]]:
        try:
            answer = await self._rpc.call(peer, Envelope("m.views", request), TIMEOUT_S)
        except BrokerError:
            return []  # down, unreachable or slow: its connections are not listed
        views = answer.header.get("views")
        return [v for v in views[:MAX_VIEWS] if isinstance(v, dict)] \
            if isinstance(views, list) else []

    async def close(self, node: str, name: str, reason: str) -> bool:
        """Close connection `name` held by member `node`: whether it held it."""
        if node == self._node_name or node not in self._members_up():
            return False
        answer = await self._rpc.call(node, Envelope("m.close", {"name": name,
                                                                 "reason": reason}), TIMEOUT_S)
        return bool(answer.header.get("closed"))
