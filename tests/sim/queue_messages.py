"""What the queue simulation's nodes send each other over the simulated network.

Replication travels as the shipped protocol's own objects
(replication/queue/fetch_protocol.py): `Fetch` carries a `FetchRequest` for
one queue, `FetchReply` the leader's `FetchAnswer` (the real cluster link
carries the same as the `r.fetch` envelope, logbroker/cluster/fetch_wire.py).
The rest mirror the cluster RPCs of the real wiring: `StatusRequest` /
`StatusAnswer` are `r.status` (queue_failover.py), `Heartbeat` is
`cluster.heartbeat`, `Propose` / `ProposeAnswer` are `metadata.propose`
(replicated_metadata.py), `ReadIndexRequest` / `ReadIndexAnswer` are
`metadata.read_index` (cluster_node.py), and `ForwardedPublish` is a publish that the node a
client talks to hands to the queue's leader.
"""

from __future__ import annotations

from dataclasses import dataclass

from replication.queue.failover import ReplicaStatus
from replication.queue.fetch_protocol import FetchAnswer, FetchRequest
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
    fetch: FetchRequest


@dataclass(frozen=True, slots=True)
class FetchReply:
    source: str
    target: str
    request: int
    answer: FetchAnswer


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


ClusterMessage = (Message | Heartbeat | Fetch | FetchReply | StatusRequest | StatusAnswer
                  | Propose | ProposeAnswer | ReadIndexRequest | ReadIndexAnswer
                  | ForwardedPublish)
