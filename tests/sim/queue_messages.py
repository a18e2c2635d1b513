"""What the queue simulation's nodes send each other over the simulated network.

They mirror the cluster RPCs of the real wiring, field for field where it
matters: `Fetch` / `FetchAnswer` are `r.fetch` (logbroker/cluster/replica_feed.py
and queue_followers.py: epoch `e`, next offset `n`, last epoch `le`, acked
version `av`, high watermark `hw`; answers `stream` / `truncate` / `reset` /
`refused` with the same header keys and the batches' raw bytes as blobs),
`StatusRequest` / `StatusAnswer` are `r.status` (queue_failover.py),
`Heartbeat` is `cluster.heartbeat`, `Propose` / `ProposeAnswer` are
`metadata.propose` (replicated_metadata.py), `ReadIndexRequest` /
`ReadIndexAnswer` are `metadata.read_index` (cluster_node.py), and
`ForwardedPublish` is a publish that the node a client talks to hands to the
queue's leader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replication.queue.failover import ReplicaStatus
from replication.raft.messages import Message


@dataclass(frozen=True, slots=True)
class Heartbeat:
    source: str
    target: str


@dataclass(frozen=True, slots=True)
class Fetch:
    source: str
    target: str
    request: int
    queue: str
    header: dict[str, Any]


@dataclass(frozen=True, slots=True)
class FetchAnswer:
    source: str
    target: str
    request: int
    queue: str
    op: str
    header: dict[str, Any] = field(default_factory=dict)
    blobs: tuple[bytes, ...] = ()


@dataclass(frozen=True, slots=True)
class StatusRequest:
    source: str
    target: str
    request: int
    queue: str


@dataclass(frozen=True, slots=True)
class StatusAnswer:
    source: str
    target: str
    request: int
    status: ReplicaStatus | None


@dataclass(frozen=True, slots=True)
class Propose:
    source: str
    target: str
    request: int
    data: bytes


@dataclass(frozen=True, slots=True)
class ProposeAnswer:
    source: str
    target: str
    request: int
    ok: bool
    reason: str = ""
    index: int = 0  # where the leader applied it (ok): the proposer waits to apply it too


@dataclass(frozen=True, slots=True)
class ReadIndexRequest:
    source: str
    target: str
    request: int


@dataclass(frozen=True, slots=True)
class ReadIndexAnswer:
    source: str
    target: str
    request: int
    commit: int | None  # None: not a leader with its term committed


@dataclass(frozen=True, slots=True)
class ForwardedPublish:
    source: str
    target: str
    queue: str
    publish: int  # the publisher's id for it; the confirm names it
    payload: bytes


ClusterMessage = (Message | Heartbeat | Fetch | FetchAnswer | StatusRequest | StatusAnswer
                  | Propose | ProposeAnswer | ReadIndexRequest | ReadIndexAnswer
                  | ForwardedPublish)
