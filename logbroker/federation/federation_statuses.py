"""`FederationStatuses`: the federation links and shovels of every node, as any node lists them.

RabbitMQ's `/api/federation-links` and `/api/shovels` list the whole cluster's,
each row with its `node`. Each node serves the rows of what it runs (op
`federation.statuses`); a listing asks every other up node at once over the
cluster RPC, each within `TIMEOUT_S`, and adds this node's own (member_rows.py, as
the connection listings). A node that does not answer in time is left out rather
than holding the listing up (what it runs is not known; the log says so). What a
policy names and nobody defined is known to every node alike (the plan is a function
of the metadata), so only this node's copy of those rows is listed. A standalone
node lists its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

from logbroker.cluster.cluster_rpc import ClusterRpc
from logbroker.cluster.envelope import Envelope
from logbroker.cluster.member_rows import rows_of_members
from logbroker.errors import BrokerError
from logbroker.federation.federation_links import FederationLinks

__all__ = ["FederationStatuses"]

OP = "federation.statuses"
TIMEOUT_S = 3.0
Kind = Literal["links", "shovels"]


class FederationStatuses:
    def __init__(self, links: FederationLinks, node_name: str, rpc: ClusterRpc | None = None,
                 up_nodes: Callable[[], Iterable[str]] = tuple) -> None:
        self._links = links
        self._node_name = node_name
        self._rpc = rpc
        self._up_nodes = up_nodes
        if rpc is not None:
            rpc.handle(OP, self._serve)

    async def links(self, vhost: str | None = None) -> list[dict[str, Any]]:
        """Every node's federation links, then what the plan could not make a link of."""
        rows = await self._gather("links", vhost)
        return rows + self._links.missing_statuses(vhost)

    async def shovels(self, vhost: str | None = None) -> list[dict[str, Any]]:
        return await self._gather("shovels", vhost)

    def _own(self, kind: Kind, vhost: str | None) -> list[dict[str, Any]]:
        if kind == "links":
            return self._links.link_statuses(vhost)
        return self._links.shovel_statuses(vhost)

    async def _gather(self, kind: Kind, vhost: str | None) -> list[dict[str, Any]]:
        rows = self._own(kind, vhost)
        if self._rpc is None:
            return rows
        peers = set(self._up_nodes()) - {self._node_name}
        rows += await rows_of_members(self._rpc, peers, Envelope(
            OP, {"kind": kind, "vhost": vhost}), TIMEOUT_S)
        return sorted(rows, key=_order)

    async def _serve(self, peer: str, envelope: Envelope) -> Envelope:
        kind = envelope.header.get("kind")
        vhost = envelope.header.get("vhost")
        if kind not in ("links", "shovels") or not isinstance(vhost, str | None):
            raise BrokerError(406, f"bad {OP} request: kind {kind!r}, vhost {vhost!r}")
        return Envelope("ok", {"rows": self._own(kind, vhost)})


def _order(row: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(row.get(key, "")) for key in ("vhost", "exchange", "queue", "name",
                                                   "upstream", "node"))
