"""The immutable records the metadata state holds, and their snapshot form.

Bindings are the routing core's `Binding` (source exchange, `Destination`,
key, arguments) kept per vhost; they are not redefined here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from logbroker.metadata.table_codec import decode_table, encode_table
from logbroker.routing.types import freeze

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def freeze_table(table: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(table)) if table else _EMPTY


@dataclass(frozen=True, slots=True)
class VhostRecord:
    name: str
    description: str = ""
    tags: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "tags": list(self.tags)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VhostRecord:
        return cls(data["name"], data["description"], tuple(data["tags"]))


@dataclass(frozen=True, slots=True)
class UserRecord:
    name: str
    password_hash: str
    hashing_algorithm: str
    tags: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "password_hash": self.password_hash,
            "hashing_algorithm": self.hashing_algorithm,
            "tags": list(self.tags),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UserRecord:
        return cls(
            data["name"], data["password_hash"], data["hashing_algorithm"], tuple(data["tags"])
        )


@dataclass(frozen=True, slots=True)
class PermissionRecord:
    """The configure / write / read regexes of one user in one vhost."""

    user: str
    vhost: str
    configure: str
    write: str
    read: str

    def to_json(self) -> dict[str, Any]:
        return {
            "user": self.user,
            "vhost": self.vhost,
            "configure": self.configure,
            "write": self.write,
            "read": self.read,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PermissionRecord:
        return cls(data["user"], data["vhost"], data["configure"], data["write"], data["read"])


@dataclass(frozen=True, slots=True)
class ExchangeRecord:
    vhost: str
    name: str
    type: str
    durable: bool
    auto_delete: bool
    internal: bool
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", freeze_table(self.arguments))

    def __hash__(self) -> int:
        return hash((self.vhost, self.name, self.type, freeze(self.arguments)))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "durable": self.durable,
            "auto_delete": self.auto_delete,
            "internal": self.internal,
            "arguments": encode_table(self.arguments),
        }

    @classmethod
    def from_json(cls, vhost: str, data: Mapping[str, Any]) -> ExchangeRecord:
        return cls(
            vhost,
            data["name"],
            data["type"],
            data["durable"],
            data["auto_delete"],
            data["internal"],
            decode_table(data["arguments"]),
        )


@dataclass(frozen=True, slots=True)
class QueueRecord:
    """A queue's declaration and placement. An exclusive queue is never durable (as in RabbitMQ).

    `leader_node` is the node the queue's leader replica runs on and `members`
    its replica set, leader first; `None` / `()` for a queue declared without a
    placement (a single node that predates clustering). `epoch` counts the
    queue's leaders (1 for the first; every change of leader adds one) and
    `in_sync` is the replicas that hold every confirmed message, leader first
    (see `replica_commands`).
    """

    vhost: str
    name: str
    durable: bool
    exclusive_owner: str | None
    auto_delete: bool
    arguments: Mapping[str, Any] = field(default_factory=dict)
    leader_node: str | None = None
    members: tuple[str, ...] = ()
    epoch: int = 0
    in_sync: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", freeze_table(self.arguments))

    @property
    def replicated(self) -> bool:
        """Kept on more than one node (DESIGN.md section 6)."""
        return len(self.members) > 1

    def __hash__(self) -> int:
        return hash((self.vhost, self.name, self.exclusive_owner, freeze(self.arguments)))

    @property
    def exclusive(self) -> bool:
        return self.exclusive_owner is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "durable": self.durable,
            "exclusive_owner": self.exclusive_owner,
            "auto_delete": self.auto_delete,
            "arguments": encode_table(self.arguments),
            "leader_node": self.leader_node,
            "members": list(self.members),
            "epoch": self.epoch,
            "in_sync": list(self.in_sync),
        }

    @classmethod
    def from_json(cls, vhost: str, data: Mapping[str, Any]) -> QueueRecord:
        """Snapshots written before placement (or replication) existed lack those fields."""
        return cls(
            vhost,
            data["name"],
            data["durable"],
            data["exclusive_owner"],
            data["auto_delete"],
            decode_table(data["arguments"]),
            data.get("leader_node"),
            tuple(data.get("members", ())),
            int(data.get("epoch", 0)),
            tuple(data.get("in_sync", ())),
        )


@dataclass(frozen=True, slots=True)
class ClusterNodeRecord:
    """A cluster member: where to reach it, and whether it is up, since when.

    `up` / `since_ms` are the controller's view (`SetNodeLiveness`), recorded
    so every node agrees on which nodes placement and failover may use.
    `host` is where to reach it; `host_id` the machine it runs on (the workers
    of one `serve --workers N` share it; "": unknown, a machine of its own)
    and `zone` its optional rack or zone label, which placement spreads over.
    """

    name: str
    host: str
    cluster_port: int
    amqp_port: int
    http_port: int
    up: bool
    since_ms: int
    host_id: str = ""
    zone: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "host": self.host,
            "cluster_port": self.cluster_port,
            "amqp_port": self.amqp_port,
            "http_port": self.http_port,
            "up": self.up,
            "since_ms": self.since_ms,
            "host_id": self.host_id,
            "zone": self.zone,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClusterNodeRecord:
        return cls(
            data["name"],
            data["host"],
            data["cluster_port"],
            data["amqp_port"],
            data["http_port"],
            data["up"],
            data["since_ms"],
            data.get("host_id", ""),  # absent before hosts were recorded
            data.get("zone", ""),
        )


@dataclass(frozen=True, slots=True)
class ProducerRecord:
    """What the broker remembers of a transactional producer (`producer_commands`).

    `committed` holds the last `COMMITTED_WINDOW` committed sequence numbers,
    ascending, so a commit sent again is recognised; `pending` the committed
    batches whose messages are not all known to be in their queues yet, each
    with the time of its commit (where a re-apply looks for them).
    """

    vhost: str
    name: str
    last_committed_seq: int
    committed: tuple[int, ...]
    pending: tuple[tuple[int, int], ...]  # (seq, commit_ms)
    last_commit_ms: int

    def pending_commit_ms(self, seq: int) -> int | None:
        for pending_seq, commit_ms in self.pending:
            if pending_seq == seq:
                return commit_ms
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "last_committed_seq": self.last_committed_seq,
            "committed": list(self.committed),
            "pending": [list(item) for item in self.pending],
            "last_commit_ms": self.last_commit_ms,
        }

    @classmethod
    def from_json(cls, vhost: str, data: Mapping[str, Any]) -> ProducerRecord:
        return cls(
            vhost,
            data["name"],
            data["last_committed_seq"],
            tuple(data["committed"]),
            tuple((int(seq), int(commit_ms)) for seq, commit_ms in data["pending"]),
            data["last_commit_ms"],
        )


@dataclass(frozen=True, slots=True)
class ConsumerGroupRecord:
    """A consumer group's committed positions: per queue, the next offset it will read.

    Like Kafka's committed consumer-group offsets; `offsets` keeps commit order
    (a queue keeps its place when committed again).
    """

    vhost: str
    name: str
    offsets: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", MappingProxyType(dict(self.offsets)))

    def __hash__(self) -> int:
        return hash((self.vhost, self.name))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "offsets": dict(self.offsets)}

    @classmethod
    def from_json(cls, vhost: str, data: Mapping[str, Any]) -> ConsumerGroupRecord:
        return cls(vhost, data["name"], {str(q): int(o) for q, o in data["offsets"].items()})
