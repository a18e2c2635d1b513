"""Declaring, deleting and binding, as the AMQP methods (and REST calls) ask for it.

Each function checks what RabbitMQ checks before the change (existence for
passive declares, exclusive ownership, permissions, if-unused / if-empty),
then proposes the command to the metadata store through the broker.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from typing import Any

from logbroker.broker import Broker
from logbroker.broker_config import Session
from logbroker.errors import NOT_FOUND, PRECONDITION_FAILED, BrokerError
from logbroker.metadata import (
    Bind,
    DeclareExchange,
    DeclareQueue,
    DeleteExchange,
    DeleteQueue,
    Unbind,
)
from logbroker.queue.queue_endpoint import RemoteQueueEndpoint
from logbroker.queue.queue_shell import QueueShell
from logbroker.routing import Binding, Destination


def server_generated_name(prefix: str = "amq.gen-") -> str:
    return prefix + base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")


async def declare_queue(
    broker: Broker, session: Session, name: str, *, passive: bool = False,
    durable: bool = False, exclusive: bool = False, auto_delete: bool = False,
    arguments: Mapping[str, Any] | None = None,
) -> tuple[str, int, int]:
    """queue.declare: (name, ready message count, consumer count)."""
    vhost = session.vhost
    if passive:
        if not name:
            raise BrokerError(NOT_FOUND, f"no queue '{name}' in vhost '{vhost}'")
        broker.state.check_queue_access(vhost, name, session.connection_id)
    else:
        server_named = not name
        if server_named:
            name = server_generated_name()
        broker.check(session, "queue", name, "configure")
        await broker.released(vhost, name)  # a previous instance just deleted: its files
        if broker.state.queue(vhost, name) is None:
            leader_node, members = broker.place_queue(vhost, name, arguments or {}, exclusive)
        else:
            leader_node, members = None, ()  # a redeclare keeps the queue where it is
        await broker.apply(DeclareQueue(
            vhost, name, durable=durable,
            exclusive_owner=session.connection_id if exclusive else None,
            auto_delete=auto_delete, arguments=dict(arguments or {}), server_named=server_named,
            leader_node=leader_node, members=members,
        ))
        broker.state.check_queue_access(vhost, name, session.connection_id)
    endpoint = _endpoint(broker, vhost, name)
    if not isinstance(endpoint, QueueShell):
        return (name, *await endpoint.counts())
    endpoint.core.touch(endpoint.clock())
    return name, endpoint.core.message_count, endpoint.core.consumer_count


async def delete_queue(
    broker: Broker, session: Session, name: str, *, if_unused: bool = False,
    if_empty: bool = False,
) -> int:
    """queue.delete: the number of messages deleted with it."""
    vhost = session.vhost
    broker.state.check_queue_access(vhost, name, session.connection_id)
    broker.check(session, "queue", name, "configure")
    count, consumers = await _counts(broker, vhost, name, for_delete=True)
    if if_unused and consumers:
        raise BrokerError(PRECONDITION_FAILED, f"queue '{name}' in vhost '{vhost}' in use")
    if if_empty and count:
        raise BrokerError(PRECONDITION_FAILED, f"queue '{name}' in vhost '{vhost}' is not empty")
    await broker.apply(DeleteQueue(vhost, name, if_unused=if_unused, if_empty=if_empty))
    return count


async def _counts(broker: Broker, vhost: str, name: str, for_delete: bool = False
                  ) -> tuple[int, int]:
    """(ready messages, consumers). A queue whose leader node is down can still be
    deleted, as RabbitMQ deletes a durable queue whose home node is gone."""
    try:
        endpoint = _endpoint(broker, vhost, name)
    except BrokerError:
        if for_delete and broker.state.queue(vhost, name) is not None:
            return 0, 0
        raise
    if isinstance(endpoint, QueueShell):
        return endpoint.core.message_count, endpoint.core.consumer_count
    return await endpoint.counts()


async def purge_queue(broker: Broker, session: Session, name: str) -> int:
    """queue.purge: removes ready messages (not unacked ones); returns how many."""
    broker.state.check_queue_access(session.vhost, name, session.connection_id)
    broker.check(session, "queue", name, "read")
    endpoint = _endpoint(broker, session.vhost, name)
    if isinstance(endpoint, QueueShell):
        return endpoint.purge()
    return await endpoint.purge()


async def declare_exchange(
    broker: Broker, session: Session, name: str, exchange_type: str = "direct", *,
    passive: bool = False, durable: bool = False, auto_delete: bool = False,
    internal: bool = False, arguments: Mapping[str, Any] | None = None,
) -> None:
    if passive:
        broker.state.passive_exchange(session.vhost, name)
        return
    broker.check(session, "exchange", name, "configure")
    await broker.apply(DeclareExchange(session.vhost, name, exchange_type, durable, auto_delete,
                                 internal, dict(arguments or {})))


async def delete_exchange(
    broker: Broker, session: Session, name: str, if_unused: bool = False
) -> None:
    broker.check(session, "exchange", name, "configure")
    await broker.apply(DeleteExchange(session.vhost, name, if_unused))


async def bind_queue(
    broker: Broker, session: Session, queue: str, exchange: str, routing_key: str,
    arguments: Mapping[str, Any] | None = None, *, unbind: bool = False,
) -> None:
    """queue.bind / queue.unbind: write on the queue, read on the exchange."""
    if not unbind or _is_bound(broker, session.vhost, exchange, queue, routing_key, arguments):
        # rabbit_binding:remove checks exclusive access only for a binding it will
        # remove: unbinding from a queue (or exchange) that is gone answers unbind-ok.
        broker.state.check_queue_access(session.vhost, queue, session.connection_id)
    broker.check(session, "queue", queue, "write")
    broker.check(session, "exchange", exchange, "read")
    command = Unbind if unbind else Bind
    await broker.apply(command(session.vhost, exchange, "queue", queue, routing_key,
                         dict(arguments or {})))


def _is_bound(broker: Broker, vhost: str, exchange: str, queue: str, routing_key: str,
              arguments: Mapping[str, Any] | None) -> bool:
    binding = Binding(exchange, Destination.queue(queue), routing_key, dict(arguments or {}))
    return binding in broker.state.bindings_to(vhost, binding.destination)


async def bind_exchange(
    broker: Broker, session: Session, destination: str, source: str, routing_key: str,
    arguments: Mapping[str, Any] | None = None, *, unbind: bool = False,
) -> None:
    """exchange.bind / exchange.unbind: write on the destination, read on the source."""
    broker.check(session, "exchange", destination, "write")
    broker.check(session, "exchange", source, "read")
    command = Unbind if unbind else Bind
    await broker.apply(command(session.vhost, source, "exchange", destination, routing_key,
                         dict(arguments or {})))


async def delete_exclusive_queues(broker: Broker, connection_id: str) -> None:
    """The owning connection closed: its exclusive queues go with it."""
    for record in broker.state.exclusive_queues_of(connection_id):
        await broker.apply(DeleteQueue(record.vhost, record.name))


def _endpoint(broker: Broker, vhost: str, name: str) -> QueueShell | RemoteQueueEndpoint:
    endpoint = broker.endpoint(vhost, name)
    if endpoint is None:
        raise BrokerError(NOT_FOUND, f"no queue '{name}' in vhost '{vhost}'")
    return endpoint

