"""Where a queue hands its deliveries: an AMQP channel, a WebSocket, a REST lease."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from logbroker.message import Message
from segments.record_batch import LogRecord, Record


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


@runtime_checkable
class RecordSink(DeliverySink, Protocol):
    """A sink that passes messages on without looking into them (to another node): it
    takes the stored record, which saves decoding a `Message` and encoding it again."""

    def deliver_record(
        self, queue: str, consumer_tag: str | None, offset: int, redelivered: bool,
        record: LogRecord | Record, ttl_left_ms: int | None,
    ) -> None:
        """`ttl_left_ms`: how long until the message expires in the queue (None: never)."""
        ...
