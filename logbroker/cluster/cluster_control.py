"""`ClusterControl`: what the HTTP API and the CLI may ask of a node's cluster membership.

`status()` is one JSON-ready document:

    {"cluster_name": str, "node": <this node's name>, "leader": <Raft leader or null>,
     "term": int, "commit_index": int, "applied_index": int,
     "nodes": [{"name": str, "host": str, "cluster_port": int, "amqp_port": int,
                "http_port": int, "role": "voter" | "learner" | "none",
                "status": "up" | "down", "since_ms": int, "connected": bool,
                "queue_leaders": int}, ...]}

`connected` says whether this node has a live cluster link to that node (always
true for itself); `role` is the node's place in the Raft membership.
"""

from __future__ import annotations

from typing import Any, Protocol


class ClusterControl(Protocol):
    @property
    def node_name(self) -> str: ...

    def status(self) -> dict[str, Any]: ...

    async def add_node(self, name: str, host: str, cluster_port: int) -> None:
        """Add a node (it must be running with `--join`, or be started so) as a member.

        Raises BrokerError: 406 if the name is taken by a node with another
        address, 541/503-style when there is no quorum within the timeout.
        """
        ...

    async def remove_node(self, name: str) -> None:
        """Remove a node from the membership and forget it (404 if unknown).
        Removing the node itself is `leave`."""
        ...


class ReplicaControl(Protocol):
    """What the HTTP API and the CLI may ask about replicated queues' leadership."""

    async def transfer(self, vhost: str, name: str, target: str | None) -> str:
        """Move the queue's leader to `target` (None: the best in-sync follower); return
        the new leader. 404 for an unknown queue, 406 when it is not replicated or the
        target is not an in-sync member that is up."""
        ...

    async def rebalance(self) -> list[dict[str, str]]:
        """Spread replicated queues' leaders evenly; the moves made
        (`{"vhost", "name", "from", "to"}`)."""
        ...

    async def sync(self, vhost: str, name: str) -> None:
        """Make every member that is not in sync copy the whole queue (ha-sync-mode manual)."""
        ...

    async def cancel_sync(self, vhost: str, name: str) -> None:
        """Stop the full copies `sync` started; those members take new messages only."""
        ...

    def replication_counters(self) -> dict[str, int]:
        """Since this node started: `elections` and `out_of_sync_promotions` it made as
        controller, `handovers` of queues it led."""
        ...
