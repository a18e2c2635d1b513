"""`ShovelLink`: a dynamic shovel, moving messages from a source to a destination.

Theory of operation. The source is a queue (declared durable if missing, as
RabbitMQ does) or an exchange (a server-named exclusive queue bound with
`src-exchange-key`) on `src-uri`. An URI without a host (`amqp://`, `amqp:///VHOST`)
is this broker, reached without a connection as RabbitMQ's direct connection is:
a local source is a consumer of the local queue (`LocalSource`, through the
broker's `Consuming`; the queue must exist), a local destination publishes
through the broker's `Publisher` and is confirmed when the message is durable.
The destination is `dest-uri`, to `dest-queue` (declared durable there if
missing, reached through the default exchange) or `dest-exchange` (with
`dest-exchange-key`, else the message's own routing key). Every message goes
through `_forward`, whatever the two ends: `ack-mode` `on-confirm` acks the
source only once the destination confirmed, so a kill -9 of either side loses
nothing; `on-publish` acks after the publish; `no-ack` consumes without acks.
`src-delete-after` `queue-length` counts the source queue's messages when the
shovel connects (again after a reconnect: what was in flight is still there), a
number counts that many messages moved; each message is claimed from that budget
before it is published (and given back if it is not), so no more than the budget
is moved even with a prefetch of many; once it is moved the shovel deletes itself
(its parameter is cleared), as RabbitMQ's does. Any failure closes both ends,
records the error, and the shovel reconnects after `reconnect-delay`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiormq
from aiormq.abc import DeliveredMessage
from pamqp.commands import Basic

from logbroker.federation.link_status import LinkStatus
from logbroker.federation.link_task import LinkTask, amqp_connection, record_failure, redact
from logbroker.federation.local_source import LocalConsuming, LocalDelivery, LocalSource
from logbroker.message import Message
from logbroker.metadata.shovel_parameters import local_vhost
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


class LocalShovelSide(LocalConsuming, Protocol):
    @property
    def node_name(self) -> str: ...

    def source_queue(self, vhost: str, queue: str | None, exchange: str,
                     routing_key: str) -> Awaitable[str]:
        """The local queue to consume: `queue` (declared durable when missing), else a
        new auto-delete queue bound to `exchange` with `routing_key`."""
        ...

    def publish(self, vhost: str, message: Message) -> Awaitable[bool]:
        """Publish on this broker (to the message's exchange); True once confirmed."""
        ...

    def shovel_done(self, vhost: str, name: str) -> None:
        """The shovel moved what src-delete-after allowed: clear its parameter."""
        ...


Publish = Callable[[Message], Awaitable[bool]]
Settle = Callable[[], Awaitable[None]]


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
        self._in_flight = 0  # messages claimed and not yet moved, this session

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
        self._in_flight = 0
        async with contextlib.AsyncExitStack() as stack:
            # The source first: a shovel whose source is not there goes no further.
            src_vhost = local_vhost(src_uri)
            if src_vhost is not None:
                spec = self.spec
                queue = await self._local.source_queue(
                    src_vhost, spec.src_queue, spec.src_exchange or "", spec.src_exchange_key)
                publish = await self._destination(stack, dest_uri)
                closed = await self._consume_here(stack, src_vhost, queue, publish)
            else:
                source = await stack.enter_async_context(amqp_connection(src_uri))
                channel = await source.channel()
                queue = await self._source_queue(channel)
                publish = await self._destination(stack, dest_uri)
                closed = await self._consume_there(source, channel, queue, publish)
            if self._left == 0:
                self._finished.set()
                return
            self.status.running(self._clock.wall_ms())
            finished = asyncio.ensure_future(self._finished.wait())
            either: set[asyncio.Future[Any]] = {closed, finished}
            try:
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            finally:
                finished.cancel()
            if not self._finished.is_set():
                raise ConnectionError(closed.result() if closed.done()
                                      else "the source went away")

    async def _consume_here(self, stack: contextlib.AsyncExitStack, vhost: str, queue: str,
                            publish: Publish) -> asyncio.Future[str]:
        """Consume from a queue of this broker (no connection); resolves when it stops."""
        spec = self.spec
        no_ack = spec.ack_mode == "no-ack"

        async def forward(delivery: LocalDelivery) -> None:
            async def ack() -> None:
                delivery.ack()

            async def requeue() -> None:
                delivery.requeue()

            await self._forward(delivery.message, publish, ack, requeue, no_ack)

        source = LocalSource(self._local, vhost, queue, spec.prefetch_count,
                             no_ack, forward)
        stack.callback(source.close)
        endpoint = await source.open()
        if spec.delete_after == "queue-length":
            self._left = (await endpoint.stats()).messages  # what is there now, as below
        source.start()
        return source.closed

    async def _consume_there(self, source: aiormq.Connection,
                             channel: aiormq.abc.AbstractChannel, queue: str,
                             publish: Publish) -> asyncio.Future[str]:
        """Consume over AMQP from `queue`; resolves when the connection closes."""
        no_ack = self.spec.ack_mode == "no-ack"
        if not no_ack:
            await channel.basic_qos(prefetch_count=self.spec.prefetch_count)

        async def forward(delivered: DeliveredMessage) -> None:
            tag = delivered.delivery_tag or 0

            async def ack() -> None:
                await delivered.channel.basic_ack(tag)

            async def requeue() -> None:
                await delivered.channel.basic_nack(tag, requeue=True)

            properties = delivered.header.properties
            message = Message("", delivered.routing_key or "", delivered.body, properties)
            await self._forward(message, publish, ack, requeue, no_ack)

        await channel.basic_consume(queue, forward, no_ack=no_ack)
        closed: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        def on_close(closing: asyncio.Future[Any]) -> None:
            if not closing.cancelled():
                closing.exception()  # the reason is told below, not left unretrieved
            if not closed.done():
                closed.set_result("the source closed the connection")

        asyncio.ensure_future(source.closing).add_done_callback(on_close)
        return closed

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
        dest_vhost = local_vhost(dest_uri)
        if dest_vhost is not None:
            async def publish_here(message: Message) -> bool:
                return await self._local.publish(dest_vhost, self._outgoing(message, exchange))
            return publish_here
        destination = await stack.enter_async_context(amqp_connection(dest_uri))
        channel = await destination.channel(publisher_confirms=True)
        if spec.dest_queue is not None:
            await channel.queue_declare(spec.dest_queue, durable=True)

        async def publish_there(message: Message) -> bool:
            outgoing = self._outgoing(message, exchange)
            confirmation = await channel.basic_publish(
                outgoing.body, exchange=exchange, routing_key=outgoing.routing_key,
                properties=outgoing.properties)
            return isinstance(confirmation, Basic.Ack)
        return publish_there

    def _outgoing(self, message: Message, exchange: str) -> Message:
        """The message as the destination gets it: its exchange, key and headers."""
        spec = self.spec
        properties = message.properties
        if spec.add_forward_headers:
            headers = dict(properties.headers or {})
            headers["x-shovelled"] = [{"shovel-name": spec.name, "shovel-vhost": spec.vhost,
                                       "shovelled-by": self._local.node_name,
                                       "src-queue": spec.src_queue or "",
                                       "src-exchange": spec.src_exchange or ""}]
            properties.headers = headers
        routing_key = spec.dest_exchange_key or spec.dest_queue or message.routing_key
        return Message(exchange, routing_key, message.body, properties)

    async def _forward(self, message: Message, publish: Publish, ack: Settle,
                       requeue: Settle, no_ack: bool) -> None:
        """One message to the destination, then settled at the source by the ack mode."""
        if not self._claim():
            return  # past src-delete-after: left in the source
        try:
            if self.spec.ack_mode == "on-publish":
                await ack()
                await publish(message)
            elif await publish(message):
                if not no_ack:
                    await ack()
            else:  # refused there: the source keeps it and offers it again
                await requeue()
                self._unclaim()
                return
        except BaseException:
            self._unclaim()
            raise
        self.status.moved(1)
        self._in_flight = max(0, self._in_flight - 1)
        if self._left == 0 and self._in_flight == 0:
            self._finished.set()

    def _claim(self) -> bool:
        """Take one message of what src-delete-after allows; False: no more to take."""
        if self._finished.is_set() or self._left == 0:
            return False
        if self._left is not None:
            self._left -= 1
        self._in_flight += 1
        return True

    def _unclaim(self) -> None:
        if self._left is not None:
            self._left += 1
        self._in_flight = max(0, self._in_flight - 1)
