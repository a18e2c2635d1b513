"""`AmqpTransport`: the run over AMQP 0-9-1 with aiormq, against any broker (RabbitMQ too).

One connection per producer and per consumer, as PerfTest opens them, and
one for declaring the topology; each is opened (with its timeout) by the
federation links' `amqp_connection`, and all are closed together at the end.
It moves bytes and decides nothing: the producer and consumer loops say what
to send and when to ack.
"""

from __future__ import annotations

import asyncio
import contextlib

import aiormq
from aiormq.abc import AbstractChannel, DeliveredMessage
from pamqp import commands as spec

from api.client import ConnectionFailed
from api.perf.perf_settings import PerfSettings
from api.perf.ports import ConsumePort, Deliver, Outcome, PublishPort
from logbroker.federation.link_task import amqp_connection, describe, redact

CLOSE_TIMEOUT_S = 5.0
PERSISTENT, TRANSIENT = 2, 1


class AmqpPublisher:
    def __init__(self, channel: AbstractChannel, exchange: str, settings: PerfSettings) -> None:
        self._channel, self._exchange, self._mandatory = channel, exchange, settings.mandatory
        self._delivery_mode = PERSISTENT if settings.persistent else TRANSIENT

    async def publish(self, routing_key: str, body: bytes) -> Outcome:
        # New properties each time: aiormq writes a message_id into them, by which it
        # matches a basic.return to its publish (a shared object would share one id).
        properties = spec.Basic.Properties(delivery_mode=self._delivery_mode)
        answer = await self._channel.basic_publish(
            body, exchange=self._exchange, routing_key=routing_key,
            properties=properties, mandatory=self._mandatory)
        if answer is None:
            return Outcome.SENT
        if isinstance(answer, spec.Basic.Ack):
            return Outcome.CONFIRMED
        if isinstance(answer, spec.Basic.Nack):
            return Outcome.NACKED
        return Outcome.RETURNED  # the returned message itself

    async def close(self) -> None:
        """The transport closes the connection."""


class AmqpConsumer:
    def __init__(self, channel: AbstractChannel, consumer_tag: str) -> None:
        self._channel, self._tag = channel, consumer_tag

    async def ack(self, tag: int, multiple: bool) -> None:
        await self._channel.basic_ack(tag, multiple=multiple)

    async def cancel(self) -> None:
        with contextlib.suppress(aiormq.AMQPError, asyncio.TimeoutError):
            await self._channel.basic_cancel(self._tag, timeout=CLOSE_TIMEOUT_S)

    async def close(self) -> None:
        """The transport closes the connection."""


class AmqpTransport:
    confirms_always = False

    def __init__(self, uri: str) -> None:
        self._uri = uri
        self._connections = contextlib.AsyncExitStack()

    async def _channel(self, confirms: bool = False) -> AbstractChannel:
        try:
            connection = await self._connections.enter_async_context(
                amqp_connection(self._uri))
        except (OSError, TimeoutError, aiormq.AMQPConnectionError) as error:
            raise ConnectionFailed(f"cannot connect to {redact(self._uri)}: "
                                   f"{describe(error)}") from error
        return await connection.channel(publisher_confirms=confirms, on_return_raises=False)

    async def declare(self, settings: PerfSettings) -> None:
        plan, passive = settings.topology, settings.predeclared
        channel = await self._channel()
        if plan.declares_exchange:
            await channel.exchange_declare(plan.exchange, exchange_type=plan.exchange_type,
                                           passive=passive)
        for index, queue in enumerate(plan.queues):
            await channel.queue_declare(queue, passive=passive, durable=settings.persistent,
                                        auto_delete=settings.auto_delete)
            if plan.binds:
                await channel.queue_bind(queue, plan.exchange,
                                         routing_key=plan.routing_key_for(index))
        await channel.close()

    async def publisher(self, settings: PerfSettings) -> PublishPort:
        channel = await self._channel(confirms=settings.confirm is not None)
        return AmqpPublisher(channel, settings.topology.exchange, settings)

    async def consumer(self, queue: str, settings: PerfSettings,
                       deliver: Deliver) -> ConsumePort:
        channel = await self._channel()
        if settings.qos and not settings.autoack:
            await channel.basic_qos(prefetch_count=settings.qos)

        async def on_message(message: DeliveredMessage) -> None:
            await deliver(message.body, message.delivery_tag or 0)

        ok = await channel.basic_consume(queue, on_message, no_ack=settings.autoack)
        return AmqpConsumer(channel, ok.consumer_tag or "")

    async def close(self) -> None:
        await self._connections.aclose()
