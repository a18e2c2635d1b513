"""`Definitions`: declaring, deleting and binding, as the AMQP methods (and REST calls) ask.

Each method checks what RabbitMQ checks before the change (existence for
passive declares, exclusive ownership, permissions, if-unused / if-empty),
then proposes the command to the metadata store. The command is applied on
every node (`Broker.react`), which opens or drops the queue where it is led;
what a declare or delete asks of the queue itself goes through the queue
interface (`QueueType`), whichever node leads it.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from logbroker.access_control import AccessControl
from logbroker.broker_config import Session
from logbroker.errors import NOT_FOUND, PRECONDITION_FAILED, BrokerError
from logbroker.metadata import (
    Applied,
    Bind,
    Command,
    DeclareExchange,
    DeclareQueue,
    DeleteExchange,
    DeleteQueue,
    MetadataState,
    Unbind,
)
from logbroker.queue.queue_type import QueueStats, QueueType
from logbroker.routing import Binding, Destination

__all__ = ["Definitions", "QueuePlaces", "server_generated_name"]


class QueuePlaces(Protocol):
    """Where queues are and go on this node (`Broker`)."""

    def endpoint(self, vhost: str, name: str) -> QueueType | None: ...

    def place_queue(self, vhost: str, name: str, arguments: Mapping[str, Any],
                    exclusive: bool) -> tuple[str | None, tuple[str, ...]]:
        """(leader node, replica set) for a queue about to be declared."""
        ...

    async def released(self, vhost: str, name: str) -> None:
        """Until a deleted instance of the queue has let go of its files."""
        ...


def server_generated_name(prefix: str = "amq.gen-") -> str:
    return prefix + base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")


Proposer = Callable[[Command], Awaitable[Applied]]


class Definitions:
    def __init__(self, state: Callable[[], MetadataState], access: AccessControl,
                 apply: Proposer, queues: QueuePlaces) -> None:
        self._state = state
        self._access = access
        self._apply = apply
        self._queues = queues

    async def declare_queue(
        self, session: Session, name: str, *, passive: bool = False,
        durable: bool = False, exclusive: bool = False, auto_delete: bool = False,
        arguments: Mapping[str, Any] | None = None,
    ) -> tuple[str, int, int]:
        """queue.declare: (name, ready message count, consumer count)."""
        vhost = session.vhost
        if passive:
            if not name:
                raise BrokerError(NOT_FOUND, f"no queue '{name}' in vhost '{vhost}'")
            self._state().check_queue_access(vhost, name, session.connection_id)
        else:
            name = await self._declare_queue(session, name, durable, exclusive, auto_delete,
                                             arguments or {})
        stats = await self._endpoint(vhost, name).declared()
        return name, stats.messages, stats.consumers

    async def _declare_queue(self, session: Session, name: str, durable: bool,
                             exclusive: bool, auto_delete: bool,
                             arguments: Mapping[str, Any]) -> str:
        server_named = not name
        if server_named:
            name = server_generated_name()
        self._access.check(session, "queue", name, "configure")
        owner = session.connection_id if exclusive else None
        await self._propose_queue(session.vhost, name, server_named, durable, owner,
                                  auto_delete, arguments)
        self._state().check_queue_access(session.vhost, name, session.connection_id)
        return name

    async def _propose_queue(self, vhost: str, name: str, server_named: bool, durable: bool,
                             exclusive_owner: str | None, auto_delete: bool,
                             arguments: Mapping[str, Any]) -> None:
        await self._queues.released(vhost, name)  # a previous instance just deleted: its files
        if self._state().queue(vhost, name) is None:
            leader_node, members = self._queues.place_queue(vhost, name, arguments,
                                                            exclusive_owner is not None)
        else:
            leader_node, members = None, ()  # a redeclare keeps the queue where it is
        await self._apply(DeclareQueue(
            vhost, name, durable=durable, exclusive_owner=exclusive_owner,
            auto_delete=auto_delete, arguments=dict(arguments), server_named=server_named,
            leader_node=leader_node, members=members,
        ))

    async def declare_queue_as_broker(self, vhost: str, name: str = "") -> str:
        """A queue the broker declares for itself: a shovel whose source is this broker
        (RabbitMQ's direct connection, which has no user whose permissions to check).
        A named queue is durable and declared only when missing, as RabbitMQ's shovel
        does; a server-named one is transient and auto-delete (a source exchange's
        queue, gone when the shovel's consumer is)."""
        if name:
            if self._state().queue(vhost, name) is None:
                await self._propose_queue(vhost, name, False, True, None, False, {})
            return name
        name = server_generated_name()
        await self._propose_queue(vhost, name, True, False, None, True, {})
        return name

    async def bind_queue_as_broker(self, vhost: str, queue: str, exchange: str,
                                   routing_key: str) -> None:
        """queue.bind for a queue the broker declared for itself (no user to check)."""
        self._state().passive_exchange(vhost, exchange)
        await self._apply(Bind(vhost, exchange, "queue", queue, routing_key, {}))

    async def delete_queue(self, session: Session, name: str, *, if_unused: bool = False,
                           if_empty: bool = False) -> int:
        """queue.delete: the number of messages deleted with it."""
        vhost = session.vhost
        self._state().check_queue_access(vhost, name, session.connection_id)
        self._access.check(session, "queue", name, "configure")
        count, consumers = await self._counts_for_delete(vhost, name)
        if if_unused and consumers:
            raise BrokerError(PRECONDITION_FAILED, f"queue '{name}' in vhost '{vhost}' in use")
        if if_empty and count:
            raise BrokerError(PRECONDITION_FAILED,
                              f"queue '{name}' in vhost '{vhost}' is not empty")
        await self._apply(DeleteQueue(vhost, name, if_unused=if_unused, if_empty=if_empty))
        return count

    async def _counts_for_delete(self, vhost: str, name: str) -> tuple[int, int]:
        """(ready messages, consumers). A queue whose leader node is down can still be
        deleted, as RabbitMQ deletes a durable queue whose home node is gone."""
        try:
            endpoint = self._endpoint(vhost, name)
        except BrokerError:
            if self._state().queue(vhost, name) is not None:
                return 0, 0
            raise
        stats: QueueStats = await endpoint.stats()
        return stats.messages, stats.consumers

    async def purge_queue(self, session: Session, name: str) -> int:
        """queue.purge: removes ready messages (not unacked ones); returns how many."""
        self._state().check_queue_access(session.vhost, name, session.connection_id)
        self._access.check(session, "queue", name, "read")
        return await self._endpoint(session.vhost, name).purge()

    async def declare_exchange(
        self, session: Session, name: str, exchange_type: str = "direct", *,
        passive: bool = False, durable: bool = False, auto_delete: bool = False,
        internal: bool = False, arguments: Mapping[str, Any] | None = None,
    ) -> None:
        if passive:
            self._state().passive_exchange(session.vhost, name)
            return
        self._access.check(session, "exchange", name, "configure")
        await self._apply(DeclareExchange(session.vhost, name, exchange_type, durable,
                                          auto_delete, internal, dict(arguments or {})))

    async def delete_exchange(self, session: Session, name: str, if_unused: bool = False
                              ) -> None:
        self._access.check(session, "exchange", name, "configure")
        await self._apply(DeleteExchange(session.vhost, name, if_unused))

    async def bind_queue(
        self, session: Session, queue: str, exchange: str, routing_key: str,
        arguments: Mapping[str, Any] | None = None, *, unbind: bool = False,
    ) -> None:
        """queue.bind / queue.unbind: write on the queue, read on the exchange."""
        if not unbind or self._is_bound(session.vhost, exchange, queue, routing_key, arguments):
            # rabbit_binding:remove checks exclusive access only for a binding it will
            # remove: unbinding from a queue (or exchange) that is gone answers unbind-ok.
            self._state().check_queue_access(session.vhost, queue, session.connection_id)
        self._access.check(session, "queue", queue, "write")
        self._access.check(session, "exchange", exchange, "read")
        command = Unbind if unbind else Bind
        await self._apply(command(session.vhost, exchange, "queue", queue, routing_key,
                                  dict(arguments or {})))

    def _is_bound(self, vhost: str, exchange: str, queue: str, routing_key: str,
                  arguments: Mapping[str, Any] | None) -> bool:
        binding = Binding(exchange, Destination.queue(queue), routing_key, dict(arguments or {}))
        return binding in self._state().bindings_to(vhost, binding.destination)

    async def bind_exchange(
        self, session: Session, destination: str, source: str, routing_key: str,
        arguments: Mapping[str, Any] | None = None, *, unbind: bool = False,
    ) -> None:
        """exchange.bind / exchange.unbind: write on the destination, read on the source."""
        self._access.check(session, "exchange", destination, "write")
        self._access.check(session, "exchange", source, "read")
        command = Unbind if unbind else Bind
        await self._apply(command(session.vhost, source, "exchange", destination, routing_key,
                                  dict(arguments or {})))

    async def delete_exclusive_queues(self, connection_id: str) -> None:
        """The owning connection closed: its exclusive queues go with it."""
        for record in self._state().exclusive_queues_of(connection_id):
            await self._apply(DeleteQueue(record.vhost, record.name))

    def _endpoint(self, vhost: str, name: str) -> QueueType:
        endpoint = self._queues.endpoint(vhost, name)
        if endpoint is None:
            raise BrokerError(NOT_FOUND, f"no queue '{name}' in vhost '{vhost}'")
        return endpoint
