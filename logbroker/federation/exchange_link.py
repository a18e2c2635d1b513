"""`ExchangeLink`: one federated exchange's link to one upstream, over AMQP 0-9-1 (aiormq).

Theory of operation. The link connects to the upstream (its URIs in turn),
declares there the downstream exchange's twin (same name, or the upstream's
`exchange`; same type and durability) and a durable queue
`federation: X to NODE` (with the upstream's `expires` and `message-ttl`), binds
that queue to the twin with every distinct (routing key, arguments) the
downstream exchange has bindings for, and consumes from it with the upstream's
prefetch. Each message is republished to the local exchange with the upstream
named in its `x-received-from` header; `ack-mode` `on-confirm` acks the upstream
only once the local publish is confirmed (durable in every queue it reached), so
a kill -9 of either side loses nothing: what was not acked is delivered again.
`on-publish` acks once the publish is handed over, `no-ack` consumes without acks.

A message that already crossed `max-hops` links, or that has been in this
cluster before (its cluster name in `x-received-from`, see `received_from`), is
acked and dropped: that is what stops loops in rings and meshes of brokers. The
upstream queue is named after the downstream's cluster, not the node running the
link, so a link that moves to another node of the cluster takes up the same
queue and what waited there. Bindings added and removed downstream are applied
upstream while the link runs (`bindings_changed`). A failure anywhere closes the
connection, records the error in the status, and the link reconnects after
`reconnect-delay`; messages meanwhile wait in the upstream queue.

aiormq (the client under aio-pika) is used rather than a second hand-written
client: its properties are pamqp's, the same codec the broker stores.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

import aiormq
from aiormq.abc import DeliveredMessage

from logbroker.federation.link_plan import LinkKey, Upstream
from logbroker.federation.link_status import LinkStatus
from logbroker.federation.link_task import LinkTask, amqp_connection, reconnect_forever, redact
from logbroker.federation.received_from import forwards, received_from, with_hop
from logbroker.message import Message
from logbroker.metadata.records import ExchangeRecord
from segments.clock import Clock

__all__ = ["ExchangeLink", "LocalExchange"]

class LocalExchange(Protocol):
    """What a link needs of the downstream broker."""

    @property
    def node_name(self) -> str: ...

    @property
    def cluster_name(self) -> str:
        """The name every node of this cluster goes by (`logbroker.cluster_name`)."""
        ...

    def exchange(self, vhost: str, name: str) -> ExchangeRecord | None: ...

    def binding_keys(self, vhost: str, exchange: str) -> set[tuple[str, tuple[Any, ...]]]:
        """Distinct (routing key, sorted argument items) of the exchange's bindings."""
        ...

    def publish(self, vhost: str, message: Message) -> Awaitable[bool]:
        """Publish locally; True once confirmed (False: a queue refused it)."""
        ...


@dataclass(frozen=True)
class _Hop:
    """This link's entry in `x-received-from`."""

    uri: str
    exchange: str
    cluster_name: str


class ExchangeLink:
    def __init__(self, key: LinkKey, upstream: Upstream, local: LocalExchange,
                 clock: Clock) -> None:
        self.key = key
        self.upstream = upstream
        self._local = local
        self._clock = clock
        self.status = LinkStatus(key, upstream.name, upstream.exchange or key.exchange,
                                 clock.wall_ms())
        self._task = LinkTask()
        self._resync = asyncio.Event()
        self._bound: set[tuple[str, tuple[Any, ...]]] = set()

    @property
    def queue_name(self) -> str:
        # RabbitMQ names it "federation: X -> NODE"; pamqp, the codec under aiormq,
        # refuses '>' in a queue name, so the arrow is spelled out.
        return f"federation: {self.upstream_exchange} to {self._local.cluster_name}"

    @property
    def upstream_exchange(self) -> str:
        return self.upstream.exchange or self.key.exchange

    def start(self) -> None:
        self._task.start(reconnect_forever(
            self.upstream.uris, self._session, self.status, self._clock,
            self.upstream.reconnect_delay_s,
            f"federation link {self.key.vhost}/{self.key.exchange} <- {self.upstream.name}"))

    async def stop(self) -> None:
        await self._task.stop()

    def bindings_changed(self) -> None:
        self._resync.set()

    async def _session(self, uri: str) -> None:
        self.status.starting(self._clock.wall_ms(), redact(uri))
        async with amqp_connection(uri) as connection:
            channel = await connection.channel()
            await self._declare(channel)
            await self._sync_bindings(channel)
            hop = _Hop(redact(uri), self.upstream_exchange,
                       str(connection.server_properties.get("cluster_name", "")))
            no_ack = self.upstream.ack_mode == "no-ack"
            if not no_ack:
                await channel.basic_qos(prefetch_count=self.upstream.prefetch_count)
            await channel.basic_consume(self.queue_name, self._on_message(hop, no_ack),
                                        no_ack=no_ack)
            self.status.running(self._clock.wall_ms())
            await self._follow_bindings(connection, channel)

    async def _declare(self, channel: aiormq.abc.AbstractChannel) -> None:
        local = self._local.exchange(self.key.vhost, self.key.exchange)
        if local is None:
            raise RuntimeError(f"exchange '{self.key.exchange}' is gone downstream")
        await channel.exchange_declare(self.upstream_exchange, exchange_type=local.type,
                                       durable=local.durable)
        arguments: dict[str, Any] = {}
        if self.upstream.expires_ms is not None:
            arguments["x-expires"] = self.upstream.expires_ms
        if self.upstream.message_ttl_ms is not None:
            arguments["x-message-ttl"] = self.upstream.message_ttl_ms
        await channel.queue_declare(self.queue_name, durable=True, arguments=arguments)

    async def _sync_bindings(self, channel: aiormq.abc.AbstractChannel) -> None:
        wanted = self._local.binding_keys(self.key.vhost, self.key.exchange)
        for routing_key, arguments in sorted(wanted - self._bound, key=repr):
            await channel.queue_bind(self.queue_name, self.upstream_exchange,
                                     routing_key=routing_key, arguments=dict(arguments))
        for routing_key, arguments in sorted(self._bound - wanted, key=repr):
            await channel.queue_unbind(self.queue_name, self.upstream_exchange,
                                       routing_key=routing_key, arguments=dict(arguments))
        self._bound = wanted

    async def _follow_bindings(self, connection: aiormq.Connection,
                               channel: aiormq.abc.AbstractChannel) -> None:
        """Apply downstream binding changes until the connection closes."""
        closing = asyncio.ensure_future(connection.closing)
        try:
            while True:
                changed = asyncio.ensure_future(self._resync.wait())
                done, _ = await asyncio.wait({closing, changed},
                                             return_when=asyncio.FIRST_COMPLETED)
                if closing in done:
                    changed.cancel()
                    closing.result()  # raises the reason it closed
                    raise ConnectionError("the upstream closed the connection")
                self._resync.clear()
                await self._sync_bindings(channel)
        finally:
            closing.cancel()

    def _on_message(self, hop: _Hop, no_ack: bool
                    ) -> Callable[[DeliveredMessage], Coroutine[Any, Any, None]]:
        async def on_message(delivered: DeliveredMessage) -> None:
            properties = delivered.header.properties
            headers = properties.headers or {}
            if forwards(received_from(headers), self.upstream.max_hops,
                        self._local.cluster_name):
                properties.headers = with_hop(headers, {
                    "uri": hop.uri, "exchange": hop.exchange, "cluster-name": hop.cluster_name,
                    "redelivered": bool(delivered.redelivered)})
                if not self.upstream.trust_user_id:
                    properties.user_id = None  # RabbitMQ clears it unless trusted
                message = Message(self.key.exchange, delivered.routing_key or "",
                                  delivered.body, properties)
                await self._republish(message, delivered, no_ack)
            elif not no_ack:
                await delivered.channel.basic_ack(delivered.delivery_tag or 0)
            self.status.moved(1)

        return on_message

    async def _republish(self, message: Message, delivered: DeliveredMessage,
                         no_ack: bool) -> None:
        channel, tag = delivered.channel, delivered.delivery_tag or 0
        if self.upstream.ack_mode == "on-publish":
            await channel.basic_ack(tag)
            await self._local.publish(self.key.vhost, message)
            return
        confirmed = await self._local.publish(self.key.vhost, message)
        if no_ack:
            return
        if confirmed:
            await channel.basic_ack(tag)
        else:  # a queue here refused it: the upstream keeps it and offers it again
            await channel.basic_nack(tag, requeue=True)
