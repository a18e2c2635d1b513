"""Handlers for the cluster's nodes and for moving a queue to other nodes.

The controller (the Raft leader) records which nodes form the cluster, where
they listen, and whether they are up; every node then agrees on the view
that queue placement (`logbroker.queue_placement`) and failover work from.

- `AddClusterNode`: a new node starts up since `since_ms`; for a known node
  only its address (host, ports) is updated, its liveness is kept (that is
  `SetNodeLiveness`'s business). The same address again changes nothing.
  Its `host_id` and `zone` (the machine and zone placement spreads copies
  over) are at most `MAX_LABEL` characters; empty ones keep what a known
  node has recorded (a join knows only the address).
- `RemoveClusterNode`: 404 for an unknown node. Queues it leads or
  replicates keep their record, naming it still: moving them is a failover
  decision (`SetQueuePlacement`), and `ClusterNodeRemoved` lists them.
- `SetNodeLiveness`: 404 for an unknown node; setting what already holds
  changes nothing (no event, `since_ms` kept).
- `SetQueuePlacement`: the queue must exist (404); changes nothing when the
  placement is the same. A new leader starts a new epoch; the in-sync set
  keeps the members that were in it, plus the leader.

A placement (here and in `DeclareQueue`) is checked for shape only: a leader
and its members, leader first, no repeats, no empty names; or neither (a
queue declared without placement). Whether the nodes are known is not
checked: the command was decided by a node from its view, and a node may be
removed between that decision and this entry, exactly as a removed node
stays named by the queues it led.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from logbroker.metadata.commands import (
    AddClusterNode,
    RemoveClusterNode,
    SetNodeLiveness,
    SetQueuePlacement,
)
from logbroker.metadata.errors import MetadataError, not_found, precondition_failed
from logbroker.metadata.events import (
    ClusterNodeAdded,
    ClusterNodeRemoved,
    ClusterNodeUpdated,
    Event,
    NodeLivenessChanged,
    QueuePlacementChanged,
)
from logbroker.metadata.field_values import is_integer
from logbroker.metadata.records import ClusterNodeRecord
from logbroker.metadata.reply_codes import NOT_FOUND
from logbroker.metadata.state_data import StateData

Plan = Callable[[], list[Event]]
MAX_PORT = 65535
MAX_LABEL = 255


def _nothing() -> list[Event]:
    return []


def no_cluster_node(name: str) -> MetadataError:
    return MetadataError(NOT_FOUND, f"no cluster node '{name}'")


def check_placement(leader_node: str | None, members: tuple[str, ...]) -> None:
    """Raise 406 unless (`leader_node`, `members`) is a placement (module doc)."""
    if leader_node is None:
        if members:
            raise precondition_failed("queue members given without a leader node")
        return
    if not leader_node:
        raise precondition_failed("a queue's leader node name must not be empty")
    if not members or members[0] != leader_node:
        raise precondition_failed(
            f"queue members {list(members)} must start with the leader node '{leader_node}'"
        )
    if any(not member for member in members):
        raise precondition_failed("a queue member's node name must not be empty")
    if len(set(members)) != len(members):
        raise precondition_failed(f"queue members {list(members)} name a node twice")


def _check_port(what: str, value: int, lowest: int) -> None:
    if not (is_integer(value) and lowest <= value <= MAX_PORT):
        raise precondition_failed(
            f"cluster node {what} must be an integer in {lowest}..{MAX_PORT}, got {value!r}"
        )


def _check_since(value: int) -> None:
    if not (is_integer(value) and value >= 0):
        raise precondition_failed(f"since_ms must be a non-negative integer, got {value!r}")


def _check_label(what: str, value: str) -> None:
    if not (isinstance(value, str) and len(value) <= MAX_LABEL):
        raise precondition_failed(
            f"cluster node {what} must be a string of at most {MAX_LABEL} characters, "
            f"got {value!r}"
        )


def plan_add_cluster_node(data: StateData, command: AddClusterNode) -> Plan:
    if not command.name:
        raise precondition_failed("a cluster node name must not be empty")
    if not command.host:
        raise precondition_failed(f"cluster node '{command.name}' needs a host")
    _check_port("cluster_port", command.cluster_port, 1)
    _check_port("amqp_port", command.amqp_port, 0)  # 0: that listener is off
    _check_port("http_port", command.http_port, 0)
    _check_since(command.since_ms)
    _check_label("host_id", command.host_id)
    _check_label("zone", command.zone)
    existing = data.cluster_nodes.get(command.name)
    if existing is None:
        record = ClusterNodeRecord(
            command.name, command.host, command.cluster_port, command.amqp_port,
            command.http_port, True, command.since_ms, command.host_id, command.zone,
        )  # fmt: skip

        def add() -> list[Event]:
            data.cluster_nodes[command.name] = record
            return [ClusterNodeAdded(record)]

        return add
    updated = ClusterNodeRecord(
        command.name, command.host, command.cluster_port, command.amqp_port, command.http_port,
        existing.up, existing.since_ms, command.host_id or existing.host_id,
        command.zone or existing.zone,
    )  # fmt: skip
    if updated == existing:
        return _nothing

    def update() -> list[Event]:
        data.cluster_nodes[command.name] = updated
        return [ClusterNodeUpdated(updated, existing)]

    return update


def plan_remove_cluster_node(data: StateData, command: RemoveClusterNode) -> Plan:
    record = data.cluster_nodes.get(command.name)
    if record is None:
        raise no_cluster_node(command.name)

    def remove() -> list[Event]:
        del data.cluster_nodes[command.name]
        led: list[tuple[str, str]] = []
        replicated: list[tuple[str, str]] = []
        for vhost in data.vhosts.values():
            for queue in vhost.queues.values():
                if queue.leader_node == command.name:
                    led.append((vhost.name, queue.name))
                if command.name in queue.members:
                    replicated.append((vhost.name, queue.name))
        return [ClusterNodeRemoved(record, tuple(led), tuple(replicated))]

    return remove


def plan_set_node_liveness(data: StateData, command: SetNodeLiveness) -> Plan:
    record = data.cluster_nodes.get(command.name)
    if record is None:
        raise no_cluster_node(command.name)
    _check_since(command.since_ms)
    if record.up == command.up:
        return _nothing
    updated = dataclasses.replace(record, up=command.up, since_ms=command.since_ms)

    def change() -> list[Event]:
        data.cluster_nodes[command.name] = updated
        return [NodeLivenessChanged(updated)]

    return change


def plan_set_queue_placement(data: StateData, command: SetQueuePlacement) -> Plan:
    vhost = data.vhost(command.vhost)
    queue = vhost.queues.get(command.name)
    if queue is None:
        raise not_found("queue", command.vhost, command.name)
    check_placement(command.leader_node, command.members)
    if queue.leader_node == command.leader_node and queue.members == command.members:
        return _nothing
    # A new leader starts a new epoch; replicas it adds are not in sync until they say so.
    epoch = queue.epoch + (queue.leader_node != command.leader_node)
    in_sync = tuple(node for node in command.members
                    if node == command.leader_node or node in queue.in_sync)
    moved = dataclasses.replace(queue, leader_node=command.leader_node, members=command.members,
                                epoch=epoch, in_sync=in_sync)

    def move() -> list[Event]:
        vhost.queues[command.name] = moved
        return [QueuePlacementChanged(moved, queue.leader_node, queue.members)]

    return move
