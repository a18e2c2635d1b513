"""Where a queue hands its deliveries: an AMQP channel, a WebSocket, a REST lease."""

from __future__ import annotations

from typing import Protocol

from logbroker.message import Message


class DeliverySink(Protocol):
    """Where a consumer's messages go: implemented by an AMQP channel, a WebSocket..."""

    @property
    def channel_key(self) -> str: ...

    def deliver(
        self, queue: str, consumer_tag: str | None, offset: int, redelivered: bool,
        message: Message,
    ) -> None: ...

    def consumer_cancelled(self, queue: str, consumer_tag: str,
                           leader_moved: bool = False) -> None:
        """The consumer is gone from the queue. `leader_moved`: only because the queue's
        leader moved (failover, handover); the sink may register it with the new one."""
        ...

    def credit(self) -> int | None:
        """Unacked deliveries the channel may still take (None: no channel-wide limit)."""
        ...
