"""The metadata commands: what the metadata log records, one command per entry.

Each command is a frozen dataclass; `encode_command` turns it into JSON bytes
(`{"type": "DeclareQueue", "fields": {...}}`; the fields are nested because
`DeclareExchange` has a field called `type`) and `decode_command` back. Argument tables
and policy definitions go through `table_codec`, so bytes, Decimal, datetime
and nested tables survive exactly and bool stays bool.

Commands record decisions, not requests: whatever needs information the
state machine does not have is checked by the caller before it proposes the
command. In particular `DeleteQueue.if_unused` / `if_empty` depend on consumer
and message counts, which live in the queue, not in the metadata: the caller
checks them (RabbitMQ answers `406 PRECONDITION_FAILED - queue 'q' in vhost
'/' in use` / `... not empty`) and proposes the command only when they hold;
the flags are kept for the record. Likewise exclusive-queue access for bind,
unbind, purge and delete is checked with `MetadataState.check_queue_access`.
A server-named queue (`queue.declare` with an empty name) is named by the
caller (`amq.gen-...`, from its randomness) and marked `server_named`, which
exempts it from the reserved `amq.` prefix rule.

Placement is a decision too: the declaring node picks the queue's leader node
and replica set (`logbroker.queue_placement`, from its view of the cluster
and its randomness) and records them in `DeclareQueue.leader_node` /
`members`; the cluster's nodes and their liveness are recorded with
`AddClusterNode` / `RemoveClusterNode` / `SetNodeLiveness`, and a failover
moves a queue with `SetQueuePlacement` (see `cluster_commands`). Consumer
groups' committed offsets (`CommitGroupOffsets`, `DeleteConsumerGroup`, see
`group_commands`) travel the same log, so they are as durable and as
replicated as any definition. Fields added
later have defaults, so entries written before them still decode.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Literal, Union

from logbroker.metadata.table_codec import TableDecodeError, decode_table, encode_table

DestinationKind = Literal["queue", "exchange"]
_EMPTY: Mapping[str, Any] = MappingProxyType({})


class CommandDecodeError(ValueError):
    """Bytes that are not an encoded command."""


def _freeze(table: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(table)) if table else _EMPTY


@dataclass(frozen=True)
class _TableFields:
    """Base of commands with a table field: copies it into a read-only mapping."""

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, Mapping):
                object.__setattr__(self, item.name, _freeze(value))
            elif isinstance(value, list):
                object.__setattr__(self, item.name, tuple(value))


@dataclass(frozen=True)
class AddVhost(_TableFields):
    name: str
    description: str = ""
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeleteVhost(_TableFields):
    name: str


@dataclass(frozen=True)
class PutUser(_TableFields):
    """Create or replace a user. `password_hash` is base64 as RabbitMQ stores it."""

    name: str
    password_hash: str
    hashing_algorithm: str = "rabbit_password_hashing_sha256"
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeleteUser(_TableFields):
    name: str


@dataclass(frozen=True)
class SetPermissions(_TableFields):
    user: str
    vhost: str
    configure: str
    write: str
    read: str


@dataclass(frozen=True)
class ClearPermissions(_TableFields):
    user: str
    vhost: str


@dataclass(frozen=True)
class DeclareExchange(_TableFields):
    vhost: str
    name: str
    type: str
    durable: bool = False
    auto_delete: bool = False
    internal: bool = False
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeleteExchange(_TableFields):
    vhost: str
    name: str
    if_unused: bool = False


@dataclass(frozen=True)
class Bind(_TableFields):
    vhost: str
    source: str
    destination_kind: DestinationKind
    destination: str
    routing_key: str = ""
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Unbind(_TableFields):
    vhost: str
    source: str
    destination_kind: DestinationKind
    destination: str
    routing_key: str = ""
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeclareQueue(_TableFields):
    """`exclusive_owner` is the declaring connection's id for an exclusive queue."""

    vhost: str
    name: str
    durable: bool = False
    exclusive_owner: str | None = None
    auto_delete: bool = False
    arguments: Mapping[str, Any] = field(default_factory=dict)
    server_named: bool = False
    leader_node: str | None = None
    members: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeleteQueue(_TableFields):
    """Delete a queue; `if_unused` / `if_empty` were checked by the caller (see module doc)."""

    vhost: str
    name: str
    if_unused: bool = False
    if_empty: bool = False


@dataclass(frozen=True)
class PutPolicy(_TableFields):
    vhost: str
    name: str
    pattern: str
    apply_to: str = "all"
    priority: int = 0
    definition: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeletePolicy(_TableFields):
    vhost: str
    name: str


@dataclass(frozen=True)
class SetParameter(_TableFields):
    """A runtime parameter (see `parameters`): RabbitMQ's set_parameter, vhost limits.
    The value is any JSON document (an object for most components, a list for
    federation upstream sets), kept as its compact JSON text."""

    vhost: str
    component: str
    name: str
    value_json: str = "{}"

    @classmethod
    def of(cls, vhost: str, component: str, name: str, value: Any) -> SetParameter:
        """`value` as JSON; ValueError when it is not a JSON document (NaN, bytes...)."""
        try:
            text = json.dumps(value, separators=(",", ":"), allow_nan=False,
                              ensure_ascii=False)
        except (TypeError, ValueError) as error:
            raise ValueError(f"a parameter value must be JSON: {error}") from None
        return cls(vhost, component, name, text)

    @property
    def value(self) -> Any:
        return json.loads(self.value_json)


@dataclass(frozen=True)
class ClearParameter(_TableFields):
    vhost: str
    component: str
    name: str


@dataclass(frozen=True)
class AddClusterNode(_TableFields):
    """Add a node to the cluster (up since `since_ms`), or update a known node's address.
    `host_id` / `zone`: its machine and zone ("" on a known node: keep the recorded ones)."""

    name: str
    host: str
    cluster_port: int
    amqp_port: int
    http_port: int
    since_ms: int
    host_id: str = ""
    zone: str = ""


@dataclass(frozen=True)
class RemoveClusterNode(_TableFields):
    name: str


@dataclass(frozen=True)
class SetNodeLiveness(_TableFields):
    name: str
    up: bool
    since_ms: int


@dataclass(frozen=True)
class SetQueuePlacement(_TableFields):
    """Move a queue: its new leader node and replica set (leader first)."""

    vhost: str
    name: str
    leader_node: str
    members: tuple[str, ...]


@dataclass(frozen=True)
class SetQueueInSync(_TableFields):
    """The queue's leader at `epoch` shrinks or grows its in-sync set (leader first)."""

    vhost: str
    name: str
    epoch: int
    in_sync: tuple[str, ...]


@dataclass(frozen=True)
class ElectQueueLeader(_TableFields):
    """Failover or handover: `leader_node` leads the queue from epoch `epoch + 1`.

    `epoch` is the epoch being ended; the command does nothing to a queue that
    has moved on already (another election won), nor, unless `out_of_sync`,
    elects a node the in-sync set no longer holds. `in_sync` is the new in-sync
    set, leader first, kept to members still in sync.
    """

    vhost: str
    name: str
    epoch: int
    leader_node: str
    in_sync: tuple[str, ...]
    out_of_sync: bool = False  # ha-promote-on-failure: always found no in-sync copy


@dataclass(frozen=True)
class CommitProducerBatch(_TableFields):
    """Producer `producer`'s batch `seq` is committed at `commit_ms` (producer_commands)."""

    vhost: str
    producer: str
    seq: int
    commit_ms: int


@dataclass(frozen=True)
class ProducerBatchApplied(_TableFields):
    """Every message of the committed batch is in its queues."""

    vhost: str
    producer: str
    seq: int


@dataclass(frozen=True)
class CommitGroupOffsets(_TableFields):
    """Record consumer group `group`'s next offset per queue (`group_commands`).

    Merged into what the group has: queues not named keep their offsets.
    """

    vhost: str
    group: str
    offsets: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class DeleteConsumerGroup(_TableFields):
    vhost: str
    group: str


Command = (
    AddVhost | DeleteVhost | PutUser | DeleteUser | SetPermissions | ClearPermissions
    | DeclareExchange | DeleteExchange | Bind | Unbind | DeclareQueue | DeleteQueue
    | PutPolicy | DeletePolicy | AddClusterNode | RemoveClusterNode | SetNodeLiveness
    | SetQueuePlacement | SetQueueInSync | ElectQueueLeader | CommitProducerBatch
    | ProducerBatchApplied | CommitGroupOffsets | DeleteConsumerGroup | SetParameter
    | ClearParameter
)  # fmt: skip

COMMAND_TYPES: dict[str, type[Command]] = {
    cls.__name__: cls for cls in typing.get_args(Command)
}


def encode_command(command: Command) -> bytes:
    """Compact JSON in field order; tables keep their key order, so replay is exact."""
    values: dict[str, Any] = {}
    for item in fields(command):
        value = getattr(command, item.name)
        if isinstance(value, Mapping):
            value = encode_table(value)
        elif isinstance(value, tuple):
            value = list(value)
        values[item.name] = value
    document = {"type": type(command).__name__, "fields": values}
    return json.dumps(document, separators=(",", ":"), allow_nan=False).encode()


def decode_command(data: bytes) -> Command:
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CommandDecodeError(f"not JSON: {error}") from error
    if not isinstance(document, dict) or not isinstance(document.get("fields"), dict):
        raise CommandDecodeError('a command must be a JSON object {"type": ..., "fields": {...}}')
    cls = COMMAND_TYPES.get(document.get("type", ""))
    if cls is None:
        raise CommandDecodeError(f"unknown command type {document.get('type')!r}")
    hints = typing.get_type_hints(cls)
    raw_fields = document["fields"]
    values: dict[str, Any] = {}
    for item in fields(cls):
        if item.name in raw_fields:
            values[item.name] = _decode_field(item.name, hints[item.name], raw_fields[item.name])
    try:
        return cls(**values)
    except TypeError as error:
        raise CommandDecodeError(f"{cls.__name__}: {error}") from error


def _decode_field(name: str, hint: Any, raw: Any) -> Any:
    origin = typing.get_origin(hint)
    if hint is str or hint is int or hint is bool:
        if type(raw) is not hint:
            raise CommandDecodeError(f"field {name!r} must be {hint.__name__}")
        return raw
    if origin is Literal:
        if raw not in typing.get_args(hint):
            raise CommandDecodeError(f"field {name!r} must be one of {typing.get_args(hint)}")
        return raw
    if origin in (Union, types.UnionType) and type(None) in typing.get_args(hint):
        return None if raw is None else _decode_field(name, str, raw)
    if origin is tuple:
        if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
            raise CommandDecodeError(f"field {name!r} must be a list of strings")
        return tuple(raw)
    try:
        return decode_table(raw)
    except TableDecodeError as error:
        raise CommandDecodeError(f"field {name!r}: {error}") from error
