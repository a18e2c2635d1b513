"""The `x-received-from` header: where a federated message has been, and whether it may go on.

Each federation link that moves a message appends one entry (RabbitMQ's fields:
`uri`, `exchange` or `queue`, `cluster-name` of the upstream it came from,
`redelivered`). A link forwards a message only while it has crossed fewer than
`max-hops` links and none of them came from the downstream's own cluster (its
cluster name in an entry): the message has been here already, and forwarding it
again is what would make it go round a ring or a mesh of brokers. Cluster names,
not node names, are compared: every node of a cluster says the same one, so a
message is recognised whichever node of the cluster ran the link it crossed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["RECEIVED_FROM", "forwards", "received_from", "with_hop"]

RECEIVED_FROM = "x-received-from"


def received_from(headers: Mapping[str, Any]) -> list[Any]:
    """The header's entries (none when it is absent or not a list)."""
    earlier = headers.get(RECEIVED_FROM)
    return list(earlier) if isinstance(earlier, list) else []


def forwards(received: list[Any], max_hops: int, local_cluster: str) -> bool:
    """Whether a link into `local_cluster` may forward a message that has `received`."""
    if len(received) >= max_hops:
        return False
    return not any(isinstance(entry, Mapping) and entry.get("cluster-name") == local_cluster
                   for entry in received)


def with_hop(headers: Mapping[str, Any], hop: Mapping[str, Any]) -> dict[str, Any]:
    """The headers with `hop` appended to `x-received-from`."""
    return {**headers, RECEIVED_FROM: [*received_from(headers), dict(hop)]}
