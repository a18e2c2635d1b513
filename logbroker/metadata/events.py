"""What applying a command changed: the events the broker acts on.

`MetadataState.apply` returns `Applied(events)`. An empty tuple means the
command changed nothing (an equivalent redeclare, deleting what is absent,
a binding that already exists), which is still a success. Cascades are
explicit: deleting a queue lists the bindings that went with it, an
auto-delete exchange that lost its last binding appears as
`ExchangeDeleted(auto_deleted=True)` after the event that caused it.

Cluster events tell the broker shell which nodes exist and are up, and when
a queue moved to another leader or replica set (`cluster_commands`).
"""

from __future__ import annotations

from dataclasses import dataclass

from logbroker.metadata.records import (
    ClusterNodeRecord,
    ExchangeRecord,
    ProducerRecord,
    QueueRecord,
)
from logbroker.routing import Binding


@dataclass(frozen=True, slots=True)
class VhostAdded:
    vhost: str


@dataclass(frozen=True, slots=True)
class VhostUpdated:
    vhost: str


@dataclass(frozen=True, slots=True)
class VhostDeleted:
    vhost: str
    queues: tuple[str, ...]
    exchanges: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class UserPut:
    user: str
    created: bool


@dataclass(frozen=True, slots=True)
class UserDeleted:
    user: str
    permissions_cleared_in: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PermissionsSet:
    user: str
    vhost: str


@dataclass(frozen=True, slots=True)
class PermissionsCleared:
    user: str
    vhost: str


@dataclass(frozen=True, slots=True)
class ExchangeDeclared:
    exchange: ExchangeRecord


@dataclass(frozen=True, slots=True)
class ExchangeDeleted:
    """`bindings`: every binding removed with it, from it and to it."""

    vhost: str
    name: str
    bindings: tuple[Binding, ...]
    auto_deleted: bool = False


@dataclass(frozen=True, slots=True)
class QueueDeclared:
    queue: QueueRecord


@dataclass(frozen=True, slots=True)
class QueueDeleted:
    vhost: str
    name: str
    bindings: tuple[Binding, ...]


@dataclass(frozen=True, slots=True)
class BindingAdded:
    vhost: str
    binding: Binding


@dataclass(frozen=True, slots=True)
class BindingRemoved:
    vhost: str
    binding: Binding


@dataclass(frozen=True, slots=True)
class PolicyChanged:
    """A policy was put or deleted; the objects whose effective policy changed."""

    vhost: str
    policy: str
    deleted: bool
    queues: tuple[str, ...]
    exchanges: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ParameterChanged:
    """A runtime parameter was set to a new value, or cleared (`deleted`)."""

    vhost: str
    component: str
    name: str
    deleted: bool


@dataclass(frozen=True, slots=True)
class ClusterNodeAdded:
    node: ClusterNodeRecord


@dataclass(frozen=True, slots=True)
class ClusterNodeUpdated:
    """A known node's address changed; its liveness is kept."""

    node: ClusterNodeRecord
    previous: ClusterNodeRecord


@dataclass(frozen=True, slots=True)
class ClusterNodeRemoved:
    """`queues_led` / `queues_replicated`: (vhost, queue) pairs whose record still
    names the removed node as leader / as a member; their records are kept."""

    node: ClusterNodeRecord
    queues_led: tuple[tuple[str, str], ...]
    queues_replicated: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class NodeLivenessChanged:
    """`node` is the new record: `node.up`, since `node.since_ms`."""

    node: ClusterNodeRecord


@dataclass(frozen=True, slots=True)
class QueuePlacementChanged:
    """`queue` is the new record; the previous leader and members are given for fencing."""

    queue: QueueRecord
    previous_leader: str | None
    previous_members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class QueueInSyncChanged:
    """`queue` is the new record (same leader and epoch, another in-sync set)."""

    queue: QueueRecord


@dataclass(frozen=True, slots=True)
class ProducerChanged:
    """A transactional producer's record changed (`producer`; None: it was forgotten)."""

    vhost: str
    name: str
    producer: ProducerRecord | None


@dataclass(frozen=True, slots=True)
class GroupOffsetsCommitted:
    """`offsets` is what the commit changed (queue -> new next offset)."""

    vhost: str
    group: str
    offsets: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupDeleted:
    vhost: str
    group: str


Event = (
    VhostAdded | VhostUpdated | VhostDeleted | UserPut | UserDeleted | PermissionsSet
    | PermissionsCleared | ExchangeDeclared | ExchangeDeleted | QueueDeclared | QueueDeleted
    | BindingAdded | BindingRemoved | PolicyChanged | ClusterNodeAdded | ClusterNodeUpdated
    | ClusterNodeRemoved | NodeLivenessChanged | QueuePlacementChanged | QueueInSyncChanged
    | ProducerChanged
    | GroupOffsetsCommitted | ConsumerGroupDeleted | ParameterChanged
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Applied:
    events: tuple[Event, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.events)
