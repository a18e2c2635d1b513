"""`LocalBroker`: this broker as federation links and shovels see it (their ports)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from logbroker.broker_config import Session
from logbroker.cluster_name import cluster_name
from logbroker.message import Message
from logbroker.metadata import ClearParameter
from logbroker.metadata.parameters import SHOVEL
from logbroker.metadata.records import ExchangeRecord
from logbroker.queue.delivery_sink import DeliverySink
from logbroker.queue.queue_type import QueueType

if TYPE_CHECKING:
    from logbroker.broker import Broker


# What a consumer without a prefetch limit is taken to want at once.
DEMAND_UNLIMITED = 1000


class LocalBroker:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    @property
    def node_name(self) -> str:
        return self._broker.config.node_name

    @property
    def cluster_name(self) -> str:
        return cluster_name(self._broker.state, self._broker.config.node_name)

    def exchange(self, vhost: str, name: str) -> ExchangeRecord | None:
        return self._broker.state.exchange(vhost, name)

    def binding_keys(self, vhost: str, exchange: str) -> set[tuple[str, tuple[Any, ...]]]:
        return {(binding.routing_key, tuple(sorted(binding.arguments.items())))
                for binding in self._broker.state.bindings(vhost) if binding.source == exchange}

    async def source_queue(self, vhost: str, queue: str | None, exchange: str,
                           routing_key: str) -> str:
        """A local shovel source: `queue`, declared durable when missing; else a new
        auto-delete queue bound to `exchange` with `routing_key` (404 when the exchange
        is not there, and then no queue is made)."""
        definitions = self._broker.definitions
        if queue is not None:
            return await definitions.declare_queue_as_broker(vhost, queue)
        self._broker.state.passive_exchange(vhost, exchange)
        name = await definitions.declare_queue_as_broker(vhost)
        await definitions.bind_queue_as_broker(vhost, name, exchange, routing_key)
        return name

    async def publish(self, vhost: str, message: Message) -> bool:
        result = await self._broker.publisher.publish(vhost, message)
        return result.confirmed

    async def consume_here(self, vhost: str, queue: str, sink: DeliverySink, *, no_ack: bool,
                           prefetch_count: int) -> tuple[str, QueueType]:
        return await self._broker.consuming.consume_as_broker(
            vhost, queue, sink, connection_id=sink.channel_key, no_ack=no_ack,
            prefetch_count=prefetch_count)

    def release_here(self, vhost: str, queue: str, consumer_tag: str,
                     channel_key: str) -> None:
        session = Session(channel_key, "", vhost)
        self._broker.consuming.cancel(session, queue, consumer_tag)
        self._broker.consuming.channel_closed(vhost, channel_key, {queue})

    def queue_demand(self, vhost: str, queue: str) -> int:
        shell = self._broker.queue(vhost, queue)
        if shell is None or shell.closed or shell.core.message_count > 0:
            return 0
        room = 0
        for consumer in shell.core.roster.all():
            if consumer.no_ack or consumer.prefetch_count == 0:
                return DEMAND_UNLIMITED
            room += max(0, consumer.prefetch_count - consumer.unacked)
        return room

    def shovel_done(self, vhost: str, name: str) -> None:
        """Clear the finished shovel's parameter (through Raft in a cluster)."""
        self._broker.apply_soon(ClearParameter(vhost, SHOVEL, name))
