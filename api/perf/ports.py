"""The ports a transport gives the producers and consumers: publish, settle, declare.

`amqp_transport` (aiormq, any AMQP 0-9-1 broker) and `ws_transport` (this
broker's WebSocket API) implement them; the producer and consumer loops
(`producer`, `consumer`) are the same for both.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from typing import Protocol

from api.perf.perf_settings import PerfSettings

Delivery = tuple[bytes, int]  # the body and the delivery tag
Deliver = Callable[[bytes, int], Awaitable[None]]  # called in delivery order


class Outcome(enum.Enum):
    SENT = "sent"  # written, no confirm asked
    CONFIRMED = "confirmed"
    NACKED = "nacked"
    RETURNED = "returned"  # mandatory and unroutable


class PublishPort(Protocol):
    async def publish(self, routing_key: str, body: bytes) -> Outcome:
        """Send one message; with confirms, return once the broker settled it."""
        ...

    async def close(self) -> None: ...


class ConsumePort(Protocol):
    async def ack(self, tag: int, multiple: bool) -> None: ...

    async def cancel(self) -> None:
        """Stop the deliveries; those received can still be acked."""
        ...

    async def close(self) -> None: ...


class Transport(Protocol):
    confirms_always: bool  # True: every publish is confirmed (the WebSocket)

    async def declare(self, settings: PerfSettings) -> None: ...

    async def publisher(self, settings: PerfSettings) -> PublishPort: ...

    async def consumer(self, queue: str, settings: PerfSettings,
                       deliver: Deliver) -> ConsumePort:
        """Subscribe; `deliver` is called with each delivery, in order."""
        ...

    async def close(self) -> None: ...
