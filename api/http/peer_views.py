"""The client connections and channels other cluster members hold, for the management
API: `/api/connections`, `/api/channels` and closing a connection list and reach every
node's, as RabbitMQ's management plugin does.

A node holds only its own clients' connections (under `serve --workers N` the kernel
spreads them over the workers, which share the ports). A listing asks every other
member that is up once, all in parallel, with a timeout (`m.views`): a silent member's
connections are left out, never waited for (member_rows.py, as the federation
listings). Each member answers with the views it would show the same user itself
(`ViewRequest`). Closing a connection another member holds is forwarded to it
(`m.close`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from logbroker.cluster.cluster_rpc import ClusterRpc
from logbroker.cluster.envelope import Envelope
from logbroker.cluster.member_rows import MAX_ROWS, rows_of_members
from logbroker.queue_figures import FIGURES_TIMEOUT_S

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
            return Envelope("ok", {"rows": views(envelope.header)[:MAX_ROWS]})

        async def on_close(_peer: str, envelope: Envelope) -> Envelope:
            closed = close(str(envelope.header.get("name")), str(envelope.header.get("reason")))
            return Envelope("ok", {"closed": closed})

        self._rpc.handle("m.views", on_views)
        self._rpc.handle("m.close", on_close)

    async def gather(self, request: ViewRequest) -> list[dict[str, Any]]:
        """Every other member's views (those that answered in time)."""
        peers = [name for name in self._members_up() if name != self._node_name]
        return await rows_of_members(self._rpc, peers, Envelope("m.views", request), TIMEOUT_S)

    async def close(self, node: str, name: str, reason: str) -> bool:
        """Close connection `name` held by member `node`: whether it held it."""
        if node == self._node_name or node not in self._members_up():
            return False
        answer = await self._rpc.call(node, Envelope("m.close", {"name": name,
                                                                 "reason": reason}), TIMEOUT_S)
        return bool(answer.header.get("closed"))
