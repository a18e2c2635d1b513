"""exchange.* and queue.* methods of one channel, answered from the broker's definitions.

Theory of operation
-------------------
Each method maps onto one call of :mod:`logbroker.definitions`, which checks
what RabbitMQ checks and raises :class:`~logbroker.errors.BrokerError` with
RabbitMQ's reply code and text; the channel session turns that into
channel.close (or connection.close). The reply method is returned, and the
session sends it unless the client asked for ``nowait``.

Channel state kept here is the AMQP "current queue": the last queue declared
on the channel. An empty queue name in queue.bind / purge / delete and
basic.consume / get means that queue (404 "no previously declared queue" when
there is none), and queue.bind with an empty routing key as well binds with the
queue's name as the key, as the spec and RabbitMQ do.

RabbitMQ answers delete-ok for a queue or exchange that does not exist
(deletion is idempotent since 3.x); the metadata agrees for exchanges, and the
queue case is decided here because :meth:`Definitions.delete_queue` reports the
missing queue first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pamqp import base, commands

from api.amqp.frame_encoding import build_method
from logbroker.broker import Broker
from logbroker.broker_config import Session
from logbroker.errors import NOT_FOUND, BrokerError

__all__ = ["DEFINITION_METHODS", "ChannelDefinitions"]


class ChannelDefinitions:
    """Definition methods for one channel, and its current queue."""

    def __init__(
        self, broker: Broker, session: Session, pseudo_queue: Callable[[str], bool]
    ) -> None:
        self._broker = broker
        self._session = session
        self._pseudo_queue = pseudo_queue  # direct reply-to names: passive declare succeeds
        self.last_queue = ""
        self._handlers: dict[type[base.Frame], Callable[[Any], Awaitable[base.Frame]]] = {
            commands.Exchange.Declare: self._exchange_declare,
            commands.Exchange.Delete: self._exchange_delete,
            commands.Exchange.Bind: self._exchange_bind,
            commands.Exchange.Unbind: self._exchange_unbind,
            commands.Queue.Declare: self._queue_declare,
            commands.Queue.Bind: self._queue_bind,
            commands.Queue.Unbind: self._queue_unbind,
            commands.Queue.Purge: self._queue_purge,
            commands.Queue.Delete: self._queue_delete,
        }

    async def handle(self, method: base.Frame) -> base.Frame:
        """Carry out a definition method; returns its -ok reply (raises BrokerError)."""
        return await self._handlers[type(method)](method)

    def queue_name(self, name: str) -> str:
        """``name``, or the channel's current queue when it is empty."""
        if name:
            return name
        if not self.last_queue:
            raise BrokerError(NOT_FOUND, "no previously declared queue")
        return self.last_queue

    # -- exchanges ----------------------------------------------------------------

    async def _exchange_declare(self, method: commands.Exchange.Declare) -> base.Frame:
        await self._broker.definitions.declare_exchange(
            self._session, method.exchange, method.exchange_type,
            passive=method.passive, durable=method.durable, auto_delete=method.auto_delete,
            internal=method.internal, arguments=method.arguments,
        )  # fmt: skip
        return commands.Exchange.DeclareOk()

    async def _exchange_delete(self, method: commands.Exchange.Delete) -> base.Frame:
        await self._broker.definitions.delete_exchange(
            self._session, method.exchange, method.if_unused
        )
        return commands.Exchange.DeleteOk()

    async def _exchange_bind(self, method: commands.Exchange.Bind) -> base.Frame:
        await self._broker.definitions.bind_exchange(
            self._session, method.destination, method.source,
            method.routing_key, method.arguments,
        )  # fmt: skip
        return commands.Exchange.BindOk()

    async def _exchange_unbind(self, method: commands.Exchange.Unbind) -> base.Frame:
        await self._broker.definitions.bind_exchange(
            self._session, method.destination, method.source,
            method.routing_key, method.arguments, unbind=True,
        )  # fmt: skip
        return commands.Exchange.UnbindOk()

    # -- queues ---------------------------------------------------------------------

    async def _queue_declare(self, method: commands.Queue.Declare) -> base.Frame:
        if method.passive and self._pseudo_queue(method.queue):
            return build_method(commands.Queue.DeclareOk, queue=method.queue, message_count=0,
                                consumer_count=0)
        name, messages, consumers = await self._broker.definitions.declare_queue(
            self._session, method.queue, passive=method.passive,
            durable=method.durable, exclusive=method.exclusive,
            auto_delete=method.auto_delete, arguments=method.arguments,
        )  # fmt: skip
        self.last_queue = name
        return build_method(commands.Queue.DeclareOk, queue=name, message_count=messages,
                            consumer_count=consumers)

    async def _queue_bind(self, method: commands.Queue.Bind) -> base.Frame:
        queue, key = self._queue_and_key(method.queue, method.routing_key)
        await self._broker.definitions.bind_queue(
            self._session, queue, method.exchange, key, method.arguments
        )
        return commands.Queue.BindOk()

    async def _queue_unbind(self, method: commands.Queue.Unbind) -> base.Frame:
        queue, key = self._queue_and_key(method.queue, method.routing_key)
        await self._broker.definitions.bind_queue(
            self._session, queue, method.exchange, key, method.arguments,
            unbind=True,
        )  # fmt: skip
        return commands.Queue.UnbindOk()

    async def _queue_purge(self, method: commands.Queue.Purge) -> base.Frame:
        queue = self.queue_name(method.queue)
        count = await self._broker.definitions.purge_queue(self._session, queue)
        return commands.Queue.PurgeOk(count)

    async def _queue_delete(self, method: commands.Queue.Delete) -> base.Frame:
        name = self.queue_name(method.queue)
        if self._broker.state.queue(self._session.vhost, name) is None:
            return commands.Queue.DeleteOk(0)  # idempotent, as RabbitMQ
        count = await self._broker.definitions.delete_queue(
            self._session, name, if_unused=method.if_unused,
            if_empty=method.if_empty,
        )  # fmt: skip
        return commands.Queue.DeleteOk(count)

    def _queue_and_key(self, queue: str, routing_key: str) -> tuple[str, str]:
        """The spec's shortcut: no queue and no key means the current queue for both."""
        if not queue and not routing_key:
            name = self.queue_name("")
            return name, name
        return self.queue_name(queue), routing_key


#: The method types :class:`ChannelDefinitions` answers.
DEFINITION_METHODS: frozenset[type[base.Frame]] = frozenset(
    {
        commands.Exchange.Declare,
        commands.Exchange.Delete,
        commands.Exchange.Bind,
        commands.Exchange.Unbind,
        commands.Queue.Declare,
        commands.Queue.Bind,
        commands.Queue.Unbind,
        commands.Queue.Purge,
        commands.Queue.Delete,
    }
)
