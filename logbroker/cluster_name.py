"""The cluster's name: what AMQP clients, `/api/overview`, `/api/cluster` and federation see.

RabbitMQ names a cluster after a node of it unless an operator names it. Here a
standalone node's cluster name is its node name; a cluster's is the smallest
name among its members, read from the replicated metadata, so every node of one
cluster says the same name without being told (federation's loop stop in
`x-received-from` and the name of a link's upstream queue rely on that), and
two clusters of differently named nodes never share one. It changes only when
a member with a smaller name joins or that member is removed.
"""

from __future__ import annotations

from logbroker.metadata import MetadataState

__all__ = ["cluster_name"]


def cluster_name(state: MetadataState, node_name: str) -> str:
    members = [node.name for node in state.cluster_nodes()]
    return min(members) if members else node_name
