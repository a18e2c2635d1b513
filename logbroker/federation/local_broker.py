"""`LocalBroker`: the downstream broker as federation links see it (the `LocalExchange` port)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from logbroker.message import Message
from logbroker.metadata import ClearParameter
from logbroker.metadata.parameters import SHOVEL
from logbroker.metadata.records import ExchangeRecord

if TYPE_CHECKING:
    from logbroker.broker import Broker


class LocalBroker:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    @property
    def node_name(self) -> str:
        return self._broker.config.node_name

    def exchange(self, vhost: str, name: str) -> ExchangeRecord | None:
        return self._broker.state.exchange(vhost, name)

    def binding_keys(self, vhost: str, exchange: str) -> set[tuple[str, tuple[Any, ...]]]:
        return {(binding.routing_key, tuple(sorted(binding.arguments.items())))
                for binding in self._broker.state.bindings(vhost) if binding.source == exchange}

    async def publish(self, vhost: str, message: Message) -> bool:
        result = await self._broker.publisher.publish(vhost, message)
        return result.confirmed

    def shovel_done(self, vhost: str, name: str) -> None:
        """Clear the finished shovel's parameter (through Raft in a cluster)."""
        self._broker.apply_soon(ClearParameter(vhost, SHOVEL, name))
