"""`MetadataState`: the broker's metadata as a pure, deterministic state machine.

`apply(command)` either returns `Applied(events)` or raises `MetadataError`
and leaves the state exactly as it was: every handler checks first and only
then runs the plan that mutates (see `access_commands`). No clock, no
randomness, no I/O: the same commands in the same order give the same state
on every node, which is what lets `MetadataStore` keep it as a log and a
later Raft layer replicate that log. `check(command)` runs the checks alone,
so a shell can refuse a command before it persists it.

Queries return immutable records. Policies are resolved on query, so a
policy change applies to existing and new objects alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal

from logbroker.metadata import access_commands as access
from logbroker.metadata import cluster_commands as cluster
from logbroker.metadata import group_commands as groups
from logbroker.metadata import parameter_commands as parameter_cmds
from logbroker.metadata import policy_commands as policy_cmds
from logbroker.metadata import producer_commands as producers
from logbroker.metadata import replica_commands as replica
from logbroker.metadata import topology_commands as topology
from logbroker.metadata.commands import Command, DeleteExchange, DeleteQueue
from logbroker.metadata.defaults import DEFAULT_USER, DEFAULT_VHOST, bootstrap_commands
from logbroker.metadata.errors import (
    default_exchange_refused,
    not_found,
    resource_locked,
)
from logbroker.metadata.events import Applied, Event
from logbroker.metadata.parameters import VHOST_LIMITS, limit_value
from logbroker.metadata.passwords import SHA256
from logbroker.metadata.policies import (
    Policy,
    effective_alternate_exchange,
    effective_queue_arguments,
    matching_policy,
)
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
from logbroker.metadata.state_data import StateData, data_from_json, data_to_json
from logbroker.routing import Binding, Destination, ExchangeSpec

_Planner = Callable[[StateData, Any], Callable[[], list[Event]]]
_PLANNERS: dict[str, _Planner] = {
    "AddVhost": access.plan_add_vhost,
    "DeleteVhost": access.plan_delete_vhost,
    "PutUser": access.plan_put_user,
    "DeleteUser": access.plan_delete_user,
    "SetPermissions": access.plan_set_permissions,
    "ClearPermissions": access.plan_clear_permissions,
    "DeclareExchange": topology.plan_declare_exchange,
    "DeleteExchange": topology.plan_delete_exchange,
    "Bind": topology.plan_bind,
    "Unbind": topology.plan_unbind,
    "DeclareQueue": topology.plan_declare_queue,
    "DeleteQueue": topology.plan_delete_queue,
    "PutPolicy": policy_cmds.plan_put_policy,
    "DeletePolicy": policy_cmds.plan_delete_policy,
    "AddClusterNode": cluster.plan_add_cluster_node,
    "RemoveClusterNode": cluster.plan_remove_cluster_node,
    "SetNodeLiveness": cluster.plan_set_node_liveness,
    "SetQueuePlacement": cluster.plan_set_queue_placement,
    "SetQueueInSync": replica.plan_set_queue_in_sync,
    "ElectQueueLeader": replica.plan_elect_queue_leader,
    "CommitProducerBatch": producers.plan_commit_producer_batch,
    "ProducerBatchApplied": producers.plan_producer_batch_applied,
    "CommitGroupOffsets": groups.plan_commit_group_offsets,
    "DeleteConsumerGroup": groups.plan_delete_consumer_group,
    "SetParameter": parameter_cmds.plan_set_parameter,
    "ClearParameter": parameter_cmds.plan_clear_parameter,
}


class MetadataState:
    def __init__(self) -> None:
        self._data = StateData()

    @classmethod
    def bootstrap(
        cls,
        default_password_hash: str,
        default_user: str = DEFAULT_USER,
        hashing_algorithm: str = SHA256,
        default_vhost: str = DEFAULT_VHOST,
    ) -> MetadataState:
        """A fresh broker's state: vhost `/`, user guest (administrator, full rights on `/`)."""
        state = cls()
        commands = bootstrap_commands(
            default_password_hash, default_user, hashing_algorithm, default_vhost
        )
        for command in commands:
            state.apply(command)
        return state

    # -- commands -----------------------------------------------------------

    def check(self, command: Command) -> None:
        """Raise MetadataError if `apply(command)` would; change nothing."""
        self._plan(command)

    def apply(self, command: Command) -> Applied:
        return Applied(tuple(self._plan(command)()))

    def _plan(self, command: Command) -> Callable[[], list[Event]]:
        return _PLANNERS[type(command).__name__](self._data, command)

    # -- snapshots ----------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The whole state as JSON-safe data (tables through `table_codec`)."""
        return data_to_json(self._data)

    @classmethod
    def from_snapshot(cls, document: Mapping[str, Any]) -> MetadataState:
        state = cls()
        state._data = data_from_json(document)
        return state

    # -- queries ------------------------------------------------------------

    def vhosts(self) -> tuple[VhostRecord, ...]:
        return tuple(vhost.record for vhost in self._data.vhosts.values())

    def vhost(self, name: str) -> VhostRecord | None:
        vhost = self._data.vhosts.get(name)
        return vhost.record if vhost is not None else None

    def users(self) -> tuple[UserRecord, ...]:
        return tuple(self._data.users.values())

    def user(self, name: str) -> UserRecord | None:
        return self._data.users.get(name)

    def permissions(self, user: str, vhost: str) -> PermissionRecord | None:
        return self._data.permissions.get((user, vhost))

    def all_permissions(self) -> tuple[PermissionRecord, ...]:
        return tuple(self._data.permissions.values())

    def exchanges(self, vhost: str) -> tuple[ExchangeRecord, ...]:
        data = self._data.vhosts.get(vhost)
        return tuple(data.exchanges.values()) if data is not None else ()

    def exchange(self, vhost: str, name: str) -> ExchangeRecord | None:
        data = self._data.vhosts.get(vhost)
        return data.exchanges.get(name) if data is not None else None

    def queues(self, vhost: str) -> tuple[QueueRecord, ...]:
        data = self._data.vhosts.get(vhost)
        return tuple(data.queues.values()) if data is not None else ()

    def queue(self, vhost: str, name: str) -> QueueRecord | None:
        data = self._data.vhosts.get(vhost)
        return data.queues.get(name) if data is not None else None

    def bindings(self, vhost: str) -> tuple[Binding, ...]:
        data = self._data.vhosts.get(vhost)
        return tuple(data.bindings) if data is not None else ()

    def bindings_to(self, vhost: str, destination: Destination) -> tuple[Binding, ...]:
        data = self._data.vhosts.get(vhost)
        return data.bindings.to_destination(destination) if data is not None else ()

    def consumer_groups(self, vhost: str) -> tuple[ConsumerGroupRecord, ...]:
        data = self._data.vhosts.get(vhost)
        return tuple(data.groups.values()) if data is not None else ()

    def consumer_group(self, vhost: str, name: str) -> ConsumerGroupRecord | None:
        data = self._data.vhosts.get(vhost)
        return data.groups.get(name) if data is not None else None

    def policies(self, vhost: str) -> tuple[Policy, ...]:
        data = self._data.vhosts.get(vhost)
        return tuple(data.policies.values()) if data is not None else ()

    def effective_policy(
        self, vhost: str, kind: Literal["queue", "exchange"], name: str
    ) -> Policy | None:
        return matching_policy(self.policies(vhost), kind, name)

    def queue_policy_definition(self, vhost: str, name: str) -> Mapping[str, Any]:
        """The definition of the policy that applies to the queue (empty: none)."""
        policy = self.effective_policy(vhost, "queue", name)
        return policy.definition if policy is not None else {}

    def effective_queue_arguments(self, vhost: str, name: str) -> dict[str, Any]:
        """The queue's arguments with its policy folded in (`policies` module doc)."""
        queue = self.queue(vhost, name)
        if queue is None:
            raise not_found("queue", vhost, name)
        policy = self.effective_policy(vhost, "queue", name)
        return effective_queue_arguments(queue.arguments, policy)

    def exchange_spec(self, vhost: str, name: str) -> ExchangeSpec:
        """What the routing core needs to know of an exchange, its effective AE resolved."""
        exchange = self.exchange(vhost, name)
        if exchange is None:
            raise not_found("exchange", vhost, name)
        policy = self.effective_policy(vhost, "exchange", name)
        alternate = effective_alternate_exchange(exchange.arguments, policy)
        return ExchangeSpec(name, exchange.type, exchange.arguments, alternate)

    def parameters(self, vhost: str, component: str | None = None
                   ) -> tuple[tuple[str, str, Any], ...]:
        """(component, name, value) of the vhost's runtime parameters, optionally of one
        component, in the order they were first set."""
        data = self._data.vhosts.get(vhost)
        if data is None:
            return ()
        return tuple((kind, name, value) for (kind, name), value in data.parameters.items()
                     if component is None or kind == component)

    def parameter(self, vhost: str, component: str, name: str) -> Any:
        """The parameter's JSON value, or None when it is not set."""
        data = self._data.vhosts.get(vhost)
        return data.parameters.get((component, name)) if data is not None else None

    def vhost_limit(self, vhost: str, key: str) -> int | None:
        """The vhost's `max-connections` / `max-queues` (None: no limit)."""
        return limit_value(self.parameter(vhost, VHOST_LIMITS, "limits"), key)

    def producer(self, vhost: str, name: str) -> ProducerRecord | None:
        """A transactional producer's committed batches (`producer_commands`)."""
        data = self._data.vhosts.get(vhost)
        return data.producers.get(name) if data is not None else None

    def cluster_nodes(self) -> tuple[ClusterNodeRecord, ...]:
        """The cluster's nodes, by name."""
        return tuple(sorted(self._data.cluster_nodes.values(), key=lambda node: node.name))

    def cluster_node(self, name: str) -> ClusterNodeRecord | None:
        return self._data.cluster_nodes.get(name)

    def queue_leader_counts(self) -> dict[str, int]:
        """How many queues (all vhosts) each node leads.

        Every known node is listed, 0 if it leads none; a node no longer in
        the cluster but still named as a leader is listed too. Keys by name.
        """
        return self._count_nodes(
            (queue.leader_node,) if queue.leader_node is not None else ()
            for queue in self._all_queues()
        )

    def queue_member_counts(self) -> dict[str, int]:
        """How many queues (all vhosts) each node holds a replica of, leader included."""
        return self._count_nodes(queue.members for queue in self._all_queues())

    def _all_queues(self) -> Iterator[QueueRecord]:
        for vhost in self._data.vhosts.values():
            yield from vhost.queues.values()

    def _count_nodes(self, groups: Iterable[tuple[str, ...]]) -> dict[str, int]:
        counts = dict.fromkeys(self._data.cluster_nodes, 0)
        for group in groups:
            for node in group:
                counts[node] = counts.get(node, 0) + 1
        return dict(sorted(counts.items()))

    # -- checks for operations that are not commands ------------------------

    def check_queue_access(self, vhost: str, name: str, connection_id: str | None) -> QueueRecord:
        """For passive declare, consume, get, purge, bind, delete: 404, or 405 if
        the queue is exclusive to another connection (`check_exclusive_access`, lax)."""
        queue = self.queue(vhost, name)
        if queue is None:
            raise not_found("queue", vhost, name)
        if queue.exclusive_owner is not None and queue.exclusive_owner != connection_id:
            raise resource_locked(vhost, name)
        return queue

    def passive_exchange(self, vhost: str, name: str) -> ExchangeRecord:
        """exchange.declare with passive=true: 403 for `""`, 404 when absent."""
        if name == "":
            raise default_exchange_refused()
        exchange = self.exchange(vhost, name)
        if exchange is None:
            raise not_found("exchange", vhost, name)
        return exchange

    def exclusive_queues_of(self, connection_id: str) -> tuple[QueueRecord, ...]:
        """The queues to delete when connection `connection_id` closes."""
        return tuple(
            queue
            for vhost in self._data.vhosts.values()
            for queue in vhost.queues.values()
            if queue.exclusive_owner == connection_id
        )

    def restart_cleanup_commands(self) -> list[Command]:
        """What a restarting single node deletes: transient queues and exchanges.

        RabbitMQ does not recover non-durable queues (exclusive ones included)
        or exchanges after a restart; the node proposes these commands once,
        after opening the store and before accepting connections.
        """
        commands: list[Command] = []
        for vhost in self._data.vhosts.values():
            commands.extend(
                DeleteQueue(vhost.name, queue.name)
                for queue in vhost.queues.values()
                if not queue.durable
            )
            commands.extend(
                DeleteExchange(vhost.name, exchange.name)
                for exchange in vhost.exchanges.values()
                if not exchange.durable
            )
        return commands
