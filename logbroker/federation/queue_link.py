"""`QueueLink`: one federated queue's link to one upstream queue: messages move where
consumers wait.

Theory of operation (RabbitMQ's federated queues). The link takes messages from the
upstream queue (the same name, or the upstream's `queue`; declared durable there if
missing) only while the local queue has consumers with room in their prefetch and
no message of its own ready: that is the demand, asked of the local broker before
every fetch. It then fetches up to the demand (and at most `prefetch-count`) with
basic.get, publishes each to the local queue (the publishes of one fetch overlap),
and acks the upstream once the local publish is confirmed (`on-confirm`;
`on-publish` acks first, `no-ack` fetches without acks). So a message moves, it
is not copied; a local basic.get creates no demand; a kill -9 of either side
loses nothing (what was not acked upstream is fetched again). Each moved message
carries, as RabbitMQ's do, an `x-received-from` entry naming the upstream (URI,
queue, cluster name) and whether the upstream had delivered it before
(`redelivered`): a copy that crosses twice says so; `user_id` is cleared unless
the upstream has `trust-user-id`. Without demand, or with the upstream queue
empty, the link looks again every `POLL_S`. Failures close the connection, are
recorded in the status, and the link reconnects after `reconnect-delay`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Protocol

import aiormq
from pamqp.commands import Basic

from logbroker.federation.link_plan import LinkKey, Upstream
from logbroker.federation.link_status import LinkStatus
from logbroker.federation.link_task import LinkTask, amqp_connection, reconnect_forever, redact
from logbroker.federation.received_from import with_hop
from logbroker.message import Message
from segments.clock import Clock

__all__ = ["LocalQueueSide", "QueueLink"]

POLL_S = 0.05


class LocalQueueSide(Protocol):
    def queue_demand(self, vhost: str, queue: str) -> int:
        """How many messages the queue's consumers would take now (0 while it has
        messages of its own ready, or no consumer with room)."""
        ...

    def publish(self, vhost: str, message: Message) -> Awaitable[bool]: ...


class QueueLink:
    def __init__(self, key: LinkKey, upstream: Upstream, local: LocalQueueSide,
                 clock: Clock) -> None:
        self.key = key
        self.upstream = upstream
        self._local = local
        self._clock = clock
        self.status = LinkStatus(key, upstream.name, self.upstream_queue, clock.wall_ms())
        self._task = LinkTask()

    @property
    def upstream_queue(self) -> str:
        return self.upstream.queue or self.key.exchange

    def start(self) -> None:
        self._task.start(reconnect_forever(
            self.upstream.uris, self._session, self.status, self._clock,
            self.upstream.reconnect_delay_s,
            f"federated queue {self.key.vhost}/{self.key.exchange} <- {self.upstream.name}"))

    async def stop(self) -> None:
        await self._task.stop()

    def bindings_changed(self) -> None:
        """A queue link has no bindings to follow."""

    async def _session(self, uri: str) -> None:
        self.status.starting(self._clock.wall_ms(), redact(uri))
        async with amqp_connection(uri) as connection:
            channel = await connection.channel()
            await channel.queue_declare(self.upstream_queue, durable=True)
            hop = {"uri": redact(uri), "queue": self.upstream_queue,
                   "cluster-name": str(connection.server_properties.get("cluster_name", ""))}
            self.status.running(self._clock.wall_ms())
            while True:
                demand = min(self._local.queue_demand(self.key.vhost, self.key.exchange),
                             self.upstream.prefetch_count)
                moved = await self._fetch(channel, demand, hop) if demand > 0 else 0
                if moved == 0:
                    if connection.is_closed:
                        raise ConnectionError("the upstream closed the connection")
                    await asyncio.sleep(POLL_S)

    async def _fetch(self, channel: aiormq.abc.AbstractChannel, demand: int,
                     hop: dict[str, str]) -> int:
        """Move up to `demand` messages; how many moved (0: none, the upstream queue is
        empty or refused here). The local publishes of one fetch overlap, each acked
        upstream once it is confirmed: one confirm wait per fetch, not per message."""
        no_ack = self.upstream.ack_mode == "no-ack"
        publishing: list[tuple[int, asyncio.Future[bool]]] = []
        try:
            for _ in range(demand):
                got = await channel.basic_get(self.upstream_queue, no_ack=no_ack)
                if not isinstance(got.delivery, Basic.GetOk):
                    break
                tag = got.delivery.delivery_tag or 0
                message = self._moved_message(got, bool(got.delivery.redelivered), hop)
                if self.upstream.ack_mode == "on-publish":
                    await channel.basic_ack(tag)
                publishing.append((tag, asyncio.ensure_future(
                    self._local.publish(self.key.vhost, message))))
            return await self._settle(channel, publishing)
        finally:
            # A fetch cut short (the connection lost) still lets its publishes finish:
            # what was not acked upstream comes again, flagged redelivered.
            await asyncio.gather(*(future for _, future in publishing),
                                 return_exceptions=True)

    def _moved_message(self, got: aiormq.abc.DeliveredMessage, redelivered: bool,
                       hop: dict[str, str]) -> Message:
        properties = got.header.properties
        properties.headers = with_hop(properties.headers or {}, {
            **hop, "redelivered": redelivered})
        if not self.upstream.trust_user_id:
            properties.user_id = None  # RabbitMQ clears it unless trusted
        return Message("", self.key.exchange, got.body, properties)

    async def _settle(self, channel: aiormq.abc.AbstractChannel,
                      publishing: list[tuple[int, asyncio.Future[bool]]]) -> int:
        """Ack upstream what was confirmed here (on-confirm); how many moved."""
        moved = 0
        for tag, future in publishing:
            confirmed = await future
            if self.upstream.ack_mode == "on-confirm":
                if not confirmed:
                    await channel.basic_nack(tag, requeue=True)  # refused here: it stays there
                    continue
                await channel.basic_ack(tag)
            moved += 1
        self.status.moved(moved)
        return moved
