"""`ShovelLink`: a dynamic shovel, moving messages from a source to a destination over AMQP.

Theory of operation. The source is a queue (declared durable if missing, as
RabbitMQ does) or an exchange (a server-named exclusive queue bound with
`src-exchange-key`) on `src-uri`; the destination is `dest-uri` (`amqp://`: this
broker, published through its `Publisher`), to `dest-queue` (declared durable
there if missing, reached through the default exchange) or `dest-exchange` (with
`dest-exchange-key`, else the message's own routing key). `ack-mode`
`on-confirm` acks the source only once the destination confirmed, so a kill -9 of
either side loses nothing; `on-publish` acks after the publish; `no-ack` consumes
without acks. `src-delete-after` `queue-length` counts the source queue's messages
when the shovel connects (again after a reconnect: what was in flight is still
there), a number counts that many messages moved; once they are moved
the shovel deletes itself (its parameter is cleared), as RabbitMQ's does. Any
failure closes both connections, records the error, and the shovel reconnects
after `reconnect-delay`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiormq
from aiormq.abc import DeliveredMessage
from pamqp.commands import Basic

from logbroker.federation.link_status import LinkStatus
from logbroker.federation.link_task import LinkTask, amqp_connection, record_failure, redact
from logbroker.message import Message
from logbroker.metadata.shovel_parameters import LOCAL_URI
from segments.clock import Clock

__all__ = ["LocalShovelSide", "ShovelLink", "ShovelSpec"]



@dataclass(frozen=True)
class ShovelSpec:
    vhost: str
    name: str
    src_uris: tuple[str, ...]
    dest_uris: tuple[str, ...]
    src_queue: str | None = None
    src_exchange: str | None = None
    src_exchange_key: str = "#"
    dest_queue: str | None = None
    dest_exchange: str | None = None
    dest_exchange_key: str | None = None
    ack_mode: str = "on-confirm"
    delete_after: str | int = "never"
    prefetch_count: int = 1000
    reconnect_delay_s: float = 1.0
    add_forward_headers: bool = False

    @classmethod
    def of(cls, vhost: str, name: str, value: Mapping[str, Any]) -> ShovelSpec:
        def uris(key: str) -> tuple[str, ...]:
            item = value[key]
            return tuple(item) if isinstance(item, list) else (item,)

        return cls(
            vhost, name, uris("src-uri"), uris("dest-uri"),
            src_queue=value.get("src-queue"), src_exchange=value.get("src-exchange"),
            src_exchange_key=value.get("src-exchange-key", "#"),
            dest_queue=value.get("dest-queue"), dest_exchange=value.get("dest-exchange"),
            dest_exchange_key=value.get("dest-exchange-key"),
            ack_mode=value.get("ack-mode", "on-confirm"),
            delete_after=value.get("src-delete-after", "never"),
            prefetch_count=value.get("src-prefetch-count", value.get("prefetch-count", 1000)),
            reconnect_delay_s=float(value.get("reconnect-delay", 1.0)),
            add_forward_headers=value.get("add-forward-headers", False))


class LocalShovelSide(Protocol):
    @property
    def node_name(self) -> str: ...

    def publish(self, vhost: str, message: Message) -> Awaitable[bool]:
        """Publish on this broker (to the message's exchange); True once confirmed."""
        ...

    def shovel_done(self, vhost: str, name: str) -> None:
        """The shovel moved what src-delete-after allowed: clear its parameter."""
        ...


Publish = Callable[[DeliveredMessage], Awaitable[bool]]


class ShovelLink:
    def __init__(self, spec: ShovelSpec, local: LocalShovelSide, clock: Clock) -> None:
        self.spec = spec
        self._local = local
        self._clock = clock
        self.status = LinkStatus(None, spec.name, spec.dest_exchange or "", clock.wall_ms())
        self._task = LinkTask()
        self._left: int | None = spec.delete_after if isinstance(spec.delete_after, int) \
            else None  # messages still to move; None: no end (or not counted yet)
        self._finished = asyncio.Event()

    def start(self) -> None:
        self._task.start(self._run())

    async def stop(self) -> None:
        await self._task.stop()

    async def _run(self) -> None:
        attempt = 0
        while not self._finished.is_set():
            src = self.spec.src_uris[attempt % len(self.spec.src_uris)]
            dest = self.spec.dest_uris[attempt % len(self.spec.dest_uris)]
            attempt += 1
            try:
                await self._session(src, dest)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # any failure: status, then reconnect
                record_failure(self.status, self._clock, src, error,
                               f"shovel {self.spec.vhost}/{self.spec.name}")
            if not self._finished.is_set():
                await asyncio.sleep(self.spec.reconnect_delay_s)
        self.status.terminated(self._clock.wall_ms())
        self._local.shovel_done(self.spec.vhost, self.spec.name)

    async def _session(self, src_uri: str, dest_uri: str) -> None:
        self.status.starting(self._clock.wall_ms(), redact(src_uri))
        if src_uri == LOCAL_URI:
            raise ValueError("a source on this broker (src-uri amqp://) is not served yet: "
                             "give this node's address, amqp://user:password@host:port")
        async with contextlib.AsyncExitStack() as stack:
            source = await stack.enter_async_context(amqp_connection(src_uri))
            channel = await source.channel()
            queue = await self._source_queue(channel)
            publish = await self._destination(stack, dest_uri)
            if self._left == 0:
                self._finished.set()
                return
            no_ack = self.spec.ack_mode == "no-ack"
            if not no_ack:
                await channel.basic_qos(prefetch_count=self.spec.prefetch_count)
            await channel.basic_consume(queue, self._on_message(publish, no_ack), no_ack=no_ack)
            self.status.running(self._clock.wall_ms())
            closing = asyncio.ensure_future(source.closing)
            finished = asyncio.ensure_future(self._finished.wait())
            try:
                await asyncio.wait({closing, finished}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                closing.cancel()
                finished.cancel()
            if not self._finished.is_set():
                raise ConnectionError("the source closed the connection")

    async def _source_queue(self, channel: aiormq.abc.AbstractChannel) -> str:
        spec = self.spec
        if spec.src_queue is not None:
            declared = await channel.queue_declare(spec.src_queue, durable=True)
            if spec.delete_after == "queue-length":
                # Counted again at each connect, as a restarted RabbitMQ shovel does: what
                # was in flight when the last connection broke is still in the queue.
                self._left = declared.message_count if declared else 0
            return spec.src_queue
        declared = await channel.queue_declare("", exclusive=True)
        assert declared is not None and declared.queue
        await channel.queue_bind(declared.queue, spec.src_exchange or "",
                                 routing_key=spec.src_exchange_key)
        return declared.queue

    async def _destination(self, stack: contextlib.AsyncExitStack, dest_uri: str) -> Publish:
        spec = self.spec
        exchange = spec.dest_exchange or ""
        if dest_uri == LOCAL_URI:
            async def publish_here(delivered: DeliveredMessage) -> bool:
                return await self._local.publish(spec.vhost, self._message(delivered, exchange))
            return publish_here
        destination = await stack.enter_async_context(amqp_connection(dest_uri))
        channel = await destination.channel(publisher_confirms=True)
        if spec.dest_queue is not None:
            await channel.queue_declare(spec.dest_queue, durable=True)

        async def publish_there(delivered: DeliveredMessage) -> bool:
            message = self._message(delivered, exchange)
            confirmation = await channel.basic_publish(
                message.body, exchange=exchange, routing_key=message.routing_key,
                properties=message.properties)
            return isinstance(confirmation, Basic.Ack)
        return publish_there

    def _message(self, delivered: DeliveredMessage, exchange: str) -> Message:
        spec = self.spec
        properties = delivered.header.properties
        if spec.add_forward_headers:
            headers = dict(properties.headers or {})
            headers["x-shovelled"] = [{"shovel-name": spec.name, "shovel-vhost": spec.vhost,
                                       "shovelled-by": self._local.node_name,
                                       "src-queue": spec.src_queue or "",
                                       "src-exchange": spec.src_exchange or ""}]
            properties.headers = headers
        routing_key = (spec.dest_exchange_key or spec.dest_queue
                       or delivered.routing_key or "")
        return Message(exchange, routing_key, delivered.body, properties)

    def _on_message(self, publish: Publish, no_ack: bool
                    ) -> Callable[[DeliveredMessage], Coroutine[Any, Any, None]]:
        async def on_message(delivered: DeliveredMessage) -> None:
            if self._finished.is_set():
                return  # past src-delete-after: left in the source
            channel, tag = delivered.channel, delivered.delivery_tag or 0
            if self.spec.ack_mode == "on-publish":
                await channel.basic_ack(tag)
                await publish(delivered)
            elif await publish(delivered):
                if not no_ack:
                    await channel.basic_ack(tag)
            else:
                await channel.basic_nack(tag, requeue=True)
                return
            self.status.moved(1)
            if self._left is not None:
                self._left -= 1
                if self._left <= 0:
                    self._finished.set()

        return on_message
