"""`ForwardingPort`: what the node side of any-node access needs of its cluster node.

`RemoteQueueRegistry` and `RemotePublisher` forward consumes, gets, settles
and publishes to the node that leads a queue. They need the cluster link
(`rpc`), the metadata as applied here (who leads what, which nodes are up),
whether the link to a node is up, and how far this node has applied the
metadata log (a leader catches up to it before it answers), not the whole
`ClusterNode`: the node builds this port for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from logbroker.cluster.cluster_rpc import ClusterRpc
from logbroker.metadata import MetadataState
from segments.clock import SYSTEM_CLOCK, Clock

__all__ = ["ForwardingPort"]


@dataclass(frozen=True, slots=True)
class ForwardingPort:
    node_name: str
    rpc: ClusterRpc
    state: Callable[[], MetadataState]
    is_connected: Callable[[str], bool]  # the link to that node is up
    applied_index: Callable[[], int]  # of this node's metadata log
    request_timeout_s: float  # a request to a leader (the proposal timeout)
    clock: Clock = SYSTEM_CLOCK  # when a buffered delivery expires (monotonic)
