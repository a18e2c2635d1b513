"""Handlers for exchanges, queues and bindings, with RabbitMQ's checks and cascades.

Check order follows `rabbit_channel`:

- exchange.declare: type known (406 `unknown exchange type 'x'`), not the
  default exchange (403), then for a new exchange the reserved `amq.` prefix
  (403) and argument types; an existing one must be equivalent (406). So
  redeclaring `amq.direct` as a durable direct exchange is allowed, as in
  RabbitMQ.
- exchange.delete: not `""` (403), not `amq.*` (403 `deletion of system
  exchange ... not allowed`), absent is fine (idempotent), `if_unused` fails
  while the exchange is the source of a binding (406 `... in use`).
- queue.declare: reserved prefix first (403, unless server-named), then
  equivalence with an existing queue (405/406) or validation of a new one's
  arguments (406). An exclusive queue is never durable. The placement
  (`leader_node`, `members`) is the declaring node's decision: a new queue
  takes it (its shape checked, `cluster_commands.check_placement`); a
  redeclare neither compares nor changes it, so the queue stays where it
  was first placed.
- queue.delete: absent is fine.
- bind/unbind: neither end may be the default exchange (403). A bind needs
  both ends (404, source first) and the source's type validates the binding
  (406). An unbind whose source or destination is gone has nothing to remove
  and succeeds, as `rabbit_binding:remove` does (`absent_errs_only`: only a
  queue whose node is down is an error there, and our metadata has no such
  queue); unbinding what is not bound is fine too.

Cascades (`rabbit_binding` / `rabbit_exchange:maybe_auto_delete`): deleting a
queue removes the bindings to it and its entry in every consumer group
(`group_commands`); deleting an exchange removes the bindings
from and to it; a source exchange declared auto-delete is deleted when it
loses its last binding, which may cascade further.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from logbroker.metadata.cluster_commands import check_placement
from logbroker.metadata.commands import (
    Bind,
    DeclareExchange,
    DeclareQueue,
    DeleteExchange,
    DeleteQueue,
    Unbind,
)
from logbroker.metadata.equivalence import assert_exchange_equivalent, assert_queue_equivalent
from logbroker.metadata.errors import (
    MetadataError,
    default_exchange_refused,
    not_found,
    precondition_failed,
    reserved_name,
    rs,
)
from logbroker.metadata.events import (
    BindingAdded,
    BindingRemoved,
    Event,
    ExchangeDeclared,
    ExchangeDeleted,
    QueueDeclared,
    QueueDeleted,
)
from logbroker.metadata.group_commands import drop_queue_from_groups
from logbroker.metadata.parameters import VHOST_LIMITS, limit_value
from logbroker.metadata.queue_arguments import (
    validate_exchange_arguments,
    validate_queue_arguments,
)
from logbroker.metadata.records import ExchangeRecord, QueueRecord
from logbroker.metadata.reply_codes import ACCESS_REFUSED
from logbroker.metadata.state_data import StateData, VhostData
from logbroker.routing import (
    EXCHANGE_TYPES,
    Binding,
    Destination,
    HashSource,
    parse_weight,
    validate_x_match,
)
from logbroker.staging_queues import is_staging_queue

Plan = Callable[[], list[Event]]


def _nothing() -> list[Event]:
    return []


def _reserved(name: str) -> bool:
    return name.startswith("amq.")


def plan_declare_exchange(data: StateData, command: DeclareExchange) -> Plan:
    if command.type not in EXCHANGE_TYPES:
        raise precondition_failed(f"unknown exchange type '{command.type}'")
    if command.name == "":
        raise default_exchange_refused()
    vhost = data.vhost(command.vhost)
    existing = vhost.exchanges.get(command.name)
    if existing is not None:
        assert_exchange_equivalent(
            existing, command.type, command.durable, command.auto_delete, command.internal,
            command.arguments,
        )  # fmt: skip
        return _nothing
    if _reserved(command.name):
        raise reserved_name("exchange", command.name)
    validate_exchange_arguments(command.vhost, command.name, command.arguments)
    if command.type == "x-consistent-hash":
        try:
            HashSource.from_arguments(command.arguments)
        except ValueError as error:
            raise precondition_failed(str(error)) from error
    record = ExchangeRecord(
        command.vhost, command.name, command.type, command.durable, command.auto_delete,
        command.internal, command.arguments,
    )  # fmt: skip

    def declare() -> list[Event]:
        vhost.exchanges[command.name] = record
        return [ExchangeDeclared(record)]

    return declare


def plan_delete_exchange(data: StateData, command: DeleteExchange) -> Plan:
    if command.name == "":
        raise default_exchange_refused()
    if _reserved(command.name):
        resource = rs("exchange", command.vhost, command.name)
        raise MetadataError(ACCESS_REFUSED, f"deletion of system {resource} not allowed")
    vhost = data.vhost(command.vhost)
    if command.name not in vhost.exchanges:
        return _nothing
    if command.if_unused and vhost.bindings.has_source(command.name):
        raise precondition_failed(f"{rs('exchange', command.vhost, command.name)} in use")
    return lambda: delete_exchanges(vhost, [command.name], auto_deleted=False)


def delete_exchanges(vhost: VhostData, names: Iterable[str], auto_deleted: bool) -> list[Event]:
    """Delete exchanges and what cascades from it, breadth first.

    Auto-deleted candidates are re-checked when their turn comes, so an
    exchange is deleted once and only while it still qualifies.
    """
    events: list[Event] = []
    pending = deque((name, auto_deleted) for name in names)
    while pending:
        name, auto = pending.popleft()
        exchange = vhost.exchanges.get(name)
        if exchange is None:
            continue
        if auto and (not exchange.auto_delete or vhost.bindings.has_source(name)):
            continue
        removed = dict.fromkeys(
            (*vhost.bindings.from_source(name),
             *vhost.bindings.to_destination(Destination.exchange(name)))
        )  # fmt: skip
        for binding in removed:
            vhost.bindings.remove(binding)
        del vhost.exchanges[name]
        events.append(ExchangeDeleted(vhost.name, name, tuple(removed), auto))
        sources = dict.fromkeys(binding.source for binding in removed if binding.source != name)
        pending.extend((source, True) for source in sources)
    return events


def _auto_delete_sources(vhost: VhostData, removed: Iterable[Binding]) -> list[Event]:
    sources = dict.fromkeys(binding.source for binding in removed)
    return delete_exchanges(vhost, sources, auto_deleted=True)


def plan_declare_queue(data: StateData, command: DeclareQueue) -> Plan:
    vhost = data.vhost(command.vhost)
    if not command.name:
        raise precondition_failed("empty queue name: the caller names server-named queues")
    if _reserved(command.name) and not command.server_named:
        raise reserved_name("queue", command.name)
    durable = command.durable and command.exclusive_owner is None
    existing = vhost.queues.get(command.name)
    if existing is not None:
        assert_queue_equivalent(
            existing, durable, command.auto_delete, command.arguments, command.exclusive_owner
        )
        return _nothing
    validate_queue_arguments(command.vhost, command.name, command.arguments)
    check_placement(command.leader_node, command.members)
    _check_queue_limit(vhost, command.name)
    record = QueueRecord(
        command.vhost, command.name, durable, command.exclusive_owner, command.auto_delete,
        command.arguments, command.leader_node, command.members,
        epoch=1 if command.leader_node is not None else 0, in_sync=command.members,
    )  # fmt: skip

    def declare() -> list[Event]:
        vhost.queues[command.name] = record
        return [QueueDeclared(record)]

    return declare


def _check_queue_limit(vhost: VhostData, name: str) -> None:
    """The vhost's max-queues (RabbitMQ's text). The broker's own staging queues of
    transactional batches are plumbing, not the user's queues: not counted."""
    limit = limit_value(vhost.parameters.get((VHOST_LIMITS, "limits")), "max-queues")
    if limit is None or is_staging_queue(name):
        return
    if sum(1 for queue in vhost.queues if not is_staging_queue(queue)) >= limit:
        raise precondition_failed(f"cannot declare queue '{name}': queue limit in vhost "
                                  f"'{vhost.name}' ({limit}) is reached")


def plan_delete_queue(data: StateData, command: DeleteQueue) -> Plan:
    vhost = data.vhost(command.vhost)
    if command.name not in vhost.queues:
        return _nothing
    return lambda: delete_queue(vhost, command.name)


def delete_queue(vhost: VhostData, name: str) -> list[Event]:
    removed = vhost.bindings.to_destination(Destination.queue(name))
    for binding in removed:
        vhost.bindings.remove(binding)
    del vhost.queues[name]
    drop_queue_from_groups(vhost, name)
    return [QueueDeleted(vhost.name, name, removed), *_auto_delete_sources(vhost, removed)]


def _binding_named(data: StateData, command: Bind | Unbind) -> tuple[VhostData, Binding]:
    """The binding a bind or unbind names; neither end may be the default exchange."""
    vhost = data.vhost(command.vhost)
    if command.destination_kind == "exchange" and command.destination == "":
        raise default_exchange_refused()
    if command.source == "":
        raise default_exchange_refused()
    destination = Destination(command.destination_kind, command.destination)
    binding = Binding(command.source, destination, command.routing_key, command.arguments)
    return vhost, binding


def _binding_of(data: StateData, command: Bind) -> tuple[VhostData, Binding]:
    """Check both ends of a bind; the binding it names."""
    vhost, binding = _binding_named(data, command)
    if command.source not in vhost.exchanges:
        raise not_found("exchange", command.vhost, command.source)
    destinations = vhost.queues if command.destination_kind == "queue" else vhost.exchanges
    if command.destination not in destinations:
        raise not_found(command.destination_kind, command.vhost, command.destination)
    return vhost, binding


def _validate_binding(source: ExchangeRecord, binding: Binding) -> None:
    try:
        if source.type == "headers":
            validate_x_match(binding.arguments)
        elif source.type == "x-consistent-hash":
            parse_weight(binding.routing_key)
    except ValueError as error:
        raise precondition_failed(str(error)) from error


def plan_bind(data: StateData, command: Bind) -> Plan:
    vhost, binding = _binding_of(data, command)
    _validate_binding(vhost.exchanges[command.source], binding)
    if binding in vhost.bindings:
        return _nothing

    def bind() -> list[Event]:
        vhost.bindings.add(binding)
        return [BindingAdded(vhost.name, binding)]

    return bind


def plan_unbind(data: StateData, command: Unbind) -> Plan:
    # A missing end cannot be in a binding, so the membership test covers it.
    vhost, binding = _binding_named(data, command)
    if binding not in vhost.bindings:
        return _nothing

    def unbind() -> list[Event]:
        vhost.bindings.remove(binding)
        return [BindingRemoved(vhost.name, binding), *_auto_delete_sources(vhost, [binding])]

    return unbind
