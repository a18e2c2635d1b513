"""`WsTransport`: the run over this broker's WebSocket API (`/ws`), topology over REST.

Uses the client library (`api.client`): `AsyncPublisher` (many messages per
frame, every publish confirmed) and `AsyncConsumer` (subscribe with a
prefetch, ack or multiple ack). One WebSocket per producer and per consumer.
The WebSocket has no `mandatory`: with `--flag mandatory` a publish that no
queue took counts as returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

from api.client import AsyncClient, AsyncConsumer, AsyncPublisher, Delivery, LogbrokerError
from api.perf.perf_settings import DEFAULT_WS_WINDOW, PerfSettings
from api.perf.ports import ConsumePort, Deliver, Outcome, PublishPort

CLOSE_TIMEOUT_S = 5.0


class WsPublisher:
    def __init__(self, publisher: AsyncPublisher, exchange: str, settings: PerfSettings
                 ) -> None:
        self._publisher, self._exchange, self._mandatory = publisher, exchange, settings.mandatory
        self._properties = {"delivery_mode": 2 if settings.persistent else 1}

    async def publish(self, routing_key: str, body: bytes) -> Outcome:
        future = await self._publisher.publish(self._exchange, routing_key, body,
                                               self._properties)
        result = await future
        if not result.confirmed:
            return Outcome.NACKED
        if self._mandatory and not result.routed:
            return Outcome.RETURNED
        return Outcome.CONFIRMED

    async def close(self) -> None:
        with contextlib.suppress(LogbrokerError, TimeoutError):
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await self._publisher.close()


class WsConsumer:
    """Keeps each delivery until it is acked (the prefetch bounds them) to ack through it."""

    def __init__(self, consumer: AsyncConsumer, deliver: Deliver, acks: bool) -> None:
        self._consumer, self._deliver, self._acks = consumer, deliver, acks
        self._unacked: dict[int, Delivery] = {}
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for delivery in self._consumer:
            if self._acks:
                self._unacked[delivery.delivery_tag] = delivery
            await self._deliver(delivery.body, delivery.delivery_tag)

    async def ack(self, tag: int, multiple: bool) -> None:
        delivery = self._unacked.pop(tag, None)
        if multiple:
            for settled in [t for t in self._unacked if t < tag]:
                del self._unacked[settled]
        if delivery is not None:
            await delivery.ack(multiple)

    async def cancel(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        await self._consumer.cancel(timeout=CLOSE_TIMEOUT_S)

    async def close(self) -> None:
        await self.cancel()
        with contextlib.suppress(LogbrokerError, TimeoutError):
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await self._consumer.close()


class WsTransport:
    confirms_always = True

    def __init__(self, url: str, vhost: str, timeout_s: float, tls: ssl.SSLContext | None
                 ) -> None:
        self._client = AsyncClient(url, vhost=vhost, timeout=timeout_s, tls=tls)

    async def declare(self, settings: PerfSettings) -> None:
        if settings.predeclared:
            return  # the REST API has no passive declare: use what is there
        plan = settings.topology
        if plan.declares_exchange:
            await self._client.declare_exchange(plan.exchange, plan.exchange_type,
                                                durable=False)
        for index, queue in enumerate(plan.queues):
            await self._client.declare_queue(queue, durable=settings.persistent,
                                             auto_delete=settings.auto_delete)
            if plan.binds:
                await self._client.bind(plan.exchange, queue, plan.routing_key_for(index))

    async def publisher(self, settings: PerfSettings) -> PublishPort:
        window = settings.confirm or DEFAULT_WS_WINDOW
        publisher = self._client.publisher(max_batch=min(window, 1000))
        await publisher.open()
        return WsPublisher(publisher, settings.topology.exchange, settings)

    async def consumer(self, queue: str, settings: PerfSettings,
                       deliver: Deliver) -> ConsumePort:
        consumer = self._client.consume(queue, prefetch=settings.qos or DEFAULT_WS_WINDOW,
                                        no_ack=settings.autoack)
        await consumer.start()
        return WsConsumer(consumer, deliver, acks=not settings.autoack)

    async def close(self) -> None:
        await self._client.aclose()
