"""The mutable tables behind `MetadataState`, and their JSON snapshot form.

Only the command handlers mutate these, and only inside the plan they return
after every check has passed (see `MetadataState`). Every table is an
insertion-ordered dict and the snapshot writes lists in that order, so a
state restored from a snapshot lists, matches and cascades exactly like the
one that wrote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from logbroker.metadata.binding_table import BindingTable
from logbroker.metadata.errors import no_user, no_vhost
from logbroker.metadata.policies import Policy
from logbroker.metadata.records import (
    ClusterNodeRecord,
    ConsumerGroupRecord,
    ExchangeRecord,
    PermissionRecord,
    ProducerRecord,
    QueueRecord,
    UserRecord,
    VhostRecord,
)
from logbroker.metadata.table_codec import decode_table, encode_table
from logbroker.routing import Binding, Destination

SNAPSHOT_FORMAT = 1


@dataclass
class VhostData:
    record: VhostRecord
    exchanges: dict[str, ExchangeRecord] = field(default_factory=dict)
    queues: dict[str, QueueRecord] = field(default_factory=dict)
    bindings: BindingTable = field(default_factory=BindingTable)
    policies: dict[str, Policy] = field(default_factory=dict)
    producers: dict[str, ProducerRecord] = field(default_factory=dict)
    groups: dict[str, ConsumerGroupRecord] = field(default_factory=dict)
    # Runtime parameters by (component, name): their JSON values (metadata.parameters).
    parameters: dict[tuple[str, str], Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.record.name


@dataclass
class StateData:
    vhosts: dict[str, VhostData] = field(default_factory=dict)
    users: dict[str, UserRecord] = field(default_factory=dict)
    permissions: dict[tuple[str, str], PermissionRecord] = field(default_factory=dict)
    cluster_nodes: dict[str, ClusterNodeRecord] = field(default_factory=dict)

    def vhost(self, name: str) -> VhostData:
        """The vhost's tables, or 404 NOT_FOUND."""
        data = self.vhosts.get(name)
        if data is None:
            raise no_vhost(name)
        return data

    def user(self, name: str) -> UserRecord:
        record = self.users.get(name)
        if record is None:
            raise no_user(name)
        return record


def binding_to_json(binding: Binding) -> dict[str, Any]:
    return {
        "source": binding.source,
        "destination_kind": binding.destination.kind,
        "destination": binding.destination.name,
        "routing_key": binding.routing_key,
        "arguments": encode_table(binding.arguments),
    }


def binding_from_json(data: Mapping[str, Any]) -> Binding:
    destination = Destination(data["destination_kind"], data["destination"])
    return Binding(
        data["source"], destination, data["routing_key"], decode_table(data["arguments"])
    )


def _vhost_to_json(vhost: VhostData) -> dict[str, Any]:
    return {
        **vhost.record.to_json(),
        "exchanges": [record.to_json() for record in vhost.exchanges.values()],
        "queues": [record.to_json() for record in vhost.queues.values()],
        "bindings": [binding_to_json(binding) for binding in vhost.bindings],
        "policies": [policy.to_json() for policy in vhost.policies.values()],
        "producers": [record.to_json() for record in vhost.producers.values()],
        "groups": [group.to_json() for group in vhost.groups.values()],
        "parameters": [{"component": component, "name": name, "value": value}
                       for (component, name), value in vhost.parameters.items()],
    }


def _vhost_from_json(data: Mapping[str, Any]) -> VhostData:
    vhost = VhostData(VhostRecord.from_json(data))
    name = vhost.name
    for item in data["exchanges"]:
        exchange = ExchangeRecord.from_json(name, item)
        vhost.exchanges[exchange.name] = exchange
    for item in data["queues"]:
        queue = QueueRecord.from_json(name, item)
        vhost.queues[queue.name] = queue
    for item in data["bindings"]:
        vhost.bindings.add(binding_from_json(item))
    for item in data["policies"]:
        policy = Policy.from_json(name, item)
        vhost.policies[policy.name] = policy
    for item in data.get("producers", ()):  # absent in snapshots before producer batches
        producer = ProducerRecord.from_json(name, item)
        vhost.producers[producer.name] = producer
    for item in data.get("groups", ()):  # absent in snapshots before consumer groups
        group = ConsumerGroupRecord.from_json(name, item)
        vhost.groups[group.name] = group
    for item in data.get("parameters", ()):  # absent in snapshots before parameters
        vhost.parameters[item["component"], item["name"]] = item["value"]
    return vhost


def data_to_json(data: StateData) -> dict[str, Any]:
    return {
        "format": SNAPSHOT_FORMAT,
        "vhosts": [_vhost_to_json(vhost) for vhost in data.vhosts.values()],
        "users": [user.to_json() for user in data.users.values()],
        "permissions": [record.to_json() for record in data.permissions.values()],
        "cluster_nodes": [record.to_json() for record in data.cluster_nodes.values()],
    }


def data_from_json(document: Mapping[str, Any]) -> StateData:
    if document.get("format") != SNAPSHOT_FORMAT:
        raise ValueError(f"unsupported metadata snapshot format {document.get('format')!r}")
    data = StateData()
    for item in document["vhosts"]:
        vhost = _vhost_from_json(item)
        data.vhosts[vhost.name] = vhost
    for item in document["users"]:
        user = UserRecord.from_json(item)
        data.users[user.name] = user
    for item in document["permissions"]:
        record = PermissionRecord.from_json(item)
        data.permissions[(record.user, record.vhost)] = record
    for item in document.get("cluster_nodes", ()):  # absent in snapshots before clustering
        node = ClusterNodeRecord.from_json(item)
        data.cluster_nodes[node.name] = node
    return data
