"""`/api/federation-links` and `/api/shovels` are cluster-wide: each node adds the rows of
the others, asked over the cluster RPC; a node that does not answer is left out."""

from __future__ import annotations

import asyncio
from typing import Any

from logbroker.cluster.cluster_rpc import ClusterRpc
from logbroker.federation.federation_statuses import FederationStatuses


class FakeLinks:
    def __init__(self, node: str, vhost: str = "/") -> None:
        self.node, self.vhost = node, vhost

    def link_statuses(self, vhost: str | None = None) -> list[dict[str, Any]]:
        if vhost not in (None, self.vhost):
            return []
        return [{"node": self.node, "vhost": self.vhost, "exchange": f"x-{self.node}",
                 "upstream": "up", "status": "running"}]

    def missing_statuses(self, vhost: str | None = None) -> list[dict[str, Any]]:
        return [{"node": self.node, "vhost": "/", "exchange": "nowhere", "status": "error"}]

    def shovel_statuses(self, vhost: str | None = None) -> list[dict[str, Any]]:
        return [{"node": self.node, "vhost": "/", "name": f"s-{self.node}"}]


def wired(names: list[str], silent: set[str]) -> dict[str, ClusterRpc]:
    """One ClusterRpc per node, frames handed straight to the peer's (none from `silent`)."""
    rpcs: dict[str, ClusterRpc] = {}

    def sender(source: str) -> Any:
        def send(peer: str, frame: bytes) -> bool:
            if peer in silent:
                return True  # taken, never answered
            asyncio.get_running_loop().call_soon(rpcs[peer].on_frame, source, frame)
            return True
        return send

    for name in names:
        rpcs[name] = ClusterRpc(sender(name), lambda peer, raft: None)
    return rpcs


async def test_every_node_lists_the_links_of_all(monkeypatch: Any) -> None:
    names = ["n1", "n2", "n3"]
    rpcs = wired(names, silent=set())
    statuses = {name: FederationStatuses(FakeLinks(name), name,  # type: ignore[arg-type]
                                         rpcs[name], lambda: names) for name in names}
    rows = await statuses["n2"].links()
    assert sorted(row["node"] for row in rows if row["status"] == "running") == names
    assert [row["exchange"] for row in rows if row["status"] == "error"] == ["nowhere"]
    assert sorted(row["node"] for row in await statuses["n3"].shovels()) == names
    other = await statuses["n1"].links("other")  # the vhost goes to every node
    assert [row for row in other if row["status"] == "running"] == []


async def test_a_silent_node_is_left_out_not_waited_for_forever(monkeypatch: Any) -> None:
    monkeypatch.setattr("logbroker.federation.federation_statuses.TIMEOUT_S", 0.05)
    names = ["n1", "n2"]
    rpcs = wired(names, silent={"n2"})
    mine = FederationStatuses(FakeLinks("n1"), "n1", rpcs["n1"],  # type: ignore[arg-type]
                              lambda: names)
    assert [row["node"] for row in await mine.shovels()] == ["n1"]


async def test_a_standalone_node_lists_its_own() -> None:
    mine = FederationStatuses(FakeLinks("solo"), "solo")  # type: ignore[arg-type]
    assert [row["node"] for row in await mine.links()] == ["solo", "solo"]
