"""`AsyncClient`: the broker over REST (httpx) and WebSocket (websockets), for asyncio code.

    async with AsyncClient("http://guest:guest@a:15672,http://guest:guest@b:15672") as c:
        await c.declare_queue("events")
        results = await c.publish_batch("", [b"one", b"two"], routing_key="events")
        async for record in c.replay("events", from_offset=0):
            ...

Requests go to the current node; on a connection error (never on an HTTP
error) the client moves to the next node and retries idempotent requests.
`vhost` defaults to the client's (`"/"` unless given).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from api.client import calls
from api.client.base import ClientBase, batches, listing_filter, outgoing
from api.client.calls import Call
from api.client.errors import LogbrokerError
from api.client.messages import (
    GotMessage,
    NodeStatus,
    OutgoingMessage,
    Properties,
    PublishResult,
    Record,
    ReplayPage,
    SettleResult,
)
from api.client.replay import ReplayCursor
from api.client.ws_connection import describe
from api.client.ws_publisher import AsyncPublisher
from api.client.ws_streams import AsyncConsumer, AsyncReplayStream

T = TypeVar("T")
Objects = list[dict[str, Any]]


class AsyncClient(ClientBase):
    def __init__(self, urls: str | Sequence[str] | None = None, *, vhost: str = "/",
                 timeout: float = 30.0, rounds: int = 2, backoff_s: float = 0.1,
                 tls: ssl.SSLContext | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(urls, vhost=vhost, timeout=timeout, rounds=rounds, backoff_s=backoff_s,
                         tls=tls)
        self._http = httpx.AsyncClient(timeout=self._timeouts(), transport=transport,
                                  verify=self._verify)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call[T]) -> T:
        problems: list[str] = []
        for attempt, node in enumerate(self._ring.attempts()):
            try:
                response = await self._http.request(
                    call.method, node.base_url + call.path, params=call.params, json=call.body,
                    auth=node.auth)
                leader = self._redirect(response, node)
                if leader is not None:
                    node = leader
                    response = await self._http.request(
                        call.method, leader.base_url + call.path, params=call.params,
                        json=call.body, auth=leader.auth)
            except httpx.TransportError as error:
                self._transport_failed(call, node, error, problems)
                await asyncio.sleep(self._ring.pause_after(attempt))
                continue
            return calls.answer(response, call)
        raise self._unreachable(problems)

    # ---------------------------------------------------------------- management

    async def overview(self) -> dict[str, Any]:
        return await self._send(calls.overview())

    async def whoami(self) -> dict[str, Any]:
        return await self._send(calls.whoami())

    async def status(self) -> list[NodeStatus]:
        """Every node's overview, asked of each node in turn (no failover)."""
        out = []
        for node in self.nodes:
            call = calls.overview()
            try:
                response = await self._http.get(node.base_url + call.path, auth=node.auth,
                                                timeout=self._probe_timeout)
                out.append(NodeStatus(str(node), True, calls.answer(response, call)))
            except httpx.TransportError as error:
                out.append(NodeStatus(str(node), False, error=describe(error)))
            except LogbrokerError as error:
                out.append(NodeStatus(str(node), False, error=f"{error.status}: {error}"))
        return out

    async def _list(self, kind: str, vhost: str | None, all_vhosts: bool) -> Objects:
        scope = None if all_vhosts else self._vhost(vhost)
        return listing_filter(kind, await self._send(calls.listing(kind, scope)), scope)

    async def list_queues(self, vhost: str | None = None, *, all_vhosts: bool = False
                          ) -> Objects:
        return await self._list("queues", vhost, all_vhosts)

    async def list_exchanges(self, vhost: str | None = None, *, all_vhosts: bool = False
                             ) -> Objects:
        return await self._list("exchanges", vhost, all_vhosts)

    async def list_bindings(self, vhost: str | None = None, *, all_vhosts: bool = False
                            ) -> Objects:
        return await self._list("bindings", vhost, all_vhosts)

    async def list_policies(self, vhost: str | None = None, *, all_vhosts: bool = False
                            ) -> Objects:
        return await self._list("policies", vhost, all_vhosts)

    async def list_connections(self, vhost: str | None = None, *, all_vhosts: bool = True
                               ) -> Objects:
        return await self._list("connections", vhost, all_vhosts)

    async def list_consumers(self, vhost: str | None = None, *, all_vhosts: bool = False
                             ) -> Objects:
        return await self._list("consumers", vhost, all_vhosts)

    async def declare_queue(self, name: str, *, durable: bool = True, auto_delete: bool = False,
                            arguments: Mapping[str, Any] | None = None,
                            vhost: str | None = None) -> None:
        await self._send(calls.declare_queue(self._vhost(vhost), name, durable, auto_delete,
                                             arguments))

    async def declare_exchange(self, name: str, type: str = "direct", *, durable: bool = True,
                               auto_delete: bool = False, internal: bool = False,
                               arguments: Mapping[str, Any] | None = None,
                               vhost: str | None = None) -> None:
        await self._send(calls.declare_exchange(self._vhost(vhost), name, type, durable,
                                                auto_delete, internal, arguments))

    async def bind(self, source: str, destination: str, routing_key: str = "", *,
                   destination_type: str = "queue", arguments: Mapping[str, Any] | None = None,
                   vhost: str | None = None) -> None:
        await self._send(calls.bind(self._vhost(vhost), source, destination, destination_type,
                                    routing_key, arguments))

    async def unbind(self, source: str, destination: str, routing_key: str = "", *,
                     destination_type: str = "queue", arguments: Mapping[str, Any] | None = None,
                     vhost: str | None = None) -> None:
        vh = self._vhost(vhost)
        views = await self._send(calls.bindings_between(vh, source, destination,
                                                        destination_type))
        key = calls.binding_key(views, routing_key, arguments)
        await self._send(calls.delete_binding(vh, source, destination, destination_type, key))

    async def delete_queue(self, name: str, *, if_unused: bool = False, if_empty: bool = False,
                           vhost: str | None = None) -> None:
        await self._send(calls.delete_queue(self._vhost(vhost), name, if_unused, if_empty))

    async def delete_exchange(self, name: str, *, if_unused: bool = False,
                              vhost: str | None = None) -> None:
        await self._send(calls.delete_exchange(self._vhost(vhost), name, if_unused))

    async def purge(self, queue: str, *, vhost: str | None = None) -> None:
        await self._send(calls.purge(self._vhost(vhost), queue))

    async def set_policy(self, name: str, pattern: str, definition: Mapping[str, Any], *,
                         priority: int = 0, apply_to: str = "all", vhost: str | None = None
                         ) -> None:
        await self._send(calls.set_policy(self._vhost(vhost), name, pattern, definition,
                                          priority, apply_to))

    async def clear_policy(self, name: str, *, vhost: str | None = None) -> None:
        await self._send(calls.clear_policy(self._vhost(vhost), name))

    async def set_parameter(self, component: str, name: str, value: Mapping[str, Any], *,
                      vhost: str | None = None) -> None:
        """A runtime parameter (RabbitMQ's set_parameter): federation upstreams, limits."""
        await self._send(calls.set_parameter(component, self._vhost(vhost), name, value))

    async def clear_parameter(self, component: str, name: str, *, vhost: str | None = None
                        ) -> None:
        await self._send(calls.clear_parameter(component, self._vhost(vhost), name))

    async def list_parameters(self, component: str | None = None, vhost: str | None = None, *,
                        all_vhosts: bool = False) -> Objects:
        """Every vhost's parameters with `all_vhosts` (or no component), else --vhost's."""
        if all_vhosts or component is None:
            found = await self._send(calls.parameters(component, None))
            return found if all_vhosts else [
                item for item in found if item.get("vhost") == self._vhost(vhost)]
        return await self._send(calls.parameters(component, self._vhost(vhost)))

    async def set_vhost_limits(self, limits: Mapping[str, int], *, vhost: str | None = None
                         ) -> None:
        """The vhost's limits, replacing the old ones (`max-connections`, `max-queues`;
        negative: no limit), as rabbitmqctl set_vhost_limits."""
        await self.set_parameter("vhost-limits", "limits", limits, vhost=vhost)

    async def clear_vhost_limits(self, *, vhost: str | None = None) -> None:
        await self.clear_parameter("vhost-limits", "limits", vhost=vhost)

    async def federation_links(self, vhost: str | None = None, *, all_vhosts: bool = True
                         ) -> Objects:
        """The federation links the node runs: vhost, exchange, upstream, status
        (starting / running / error), uri, messages, timestamp, error."""
        return await self._send(calls.federation_links(None if all_vhosts else self._vhost(vhost)))

    async def shovels(self, vhost: str | None = None, *, all_vhosts: bool = True) -> Objects:
        """The dynamic shovels the node runs: name, vhost, state (starting / running /
        terminated), src and dest, messages moved, reason of the last error."""
        return await self._send(calls.shovels(None if all_vhosts else self._vhost(vhost)))

    async def add_user(self, name: str, password: str, tags: Sequence[str] = ()) -> None:
        await self._send(calls.add_user(name, password, tags))

    async def set_permissions(self, user: str, configure: str = ".*", write: str = ".*",
                              read: str = ".*", *, vhost: str | None = None) -> None:
        await self._send(calls.set_permissions(self._vhost(vhost), user, configure, write, read))

    async def export_definitions(self) -> dict[str, Any]:
        return await self._send(calls.export_definitions())

    async def import_definitions(self, document: Mapping[str, Any]) -> None:
        await self._send(calls.import_definitions(document))

    # ---------------------------------------------------------------- consumer groups

    async def commit_group_offsets(self, group: str, offsets: Mapping[str, int], *,
                             vhost: str | None = None) -> None:
        """Record the group's next offset per queue (merged into what it has; a lower
        offset than stored is a reset)."""
        await self._send(calls.commit_group_offsets(self._vhost(vhost), group, offsets))

    async def consumer_group(self, group: str, *, vhost: str | None = None) -> dict[str, Any]:
        """`{vhost, name, queues: [{queue, committed_offset, first_offset, end_offset,
        lag}], lag}`; NotFound for an unknown group."""
        return await self._send(calls.consumer_group(self._vhost(vhost), group))

    async def list_consumer_groups(self, vhost: str | None = None, *, all_vhosts: bool = False
                             ) -> Objects:
        scope = None if all_vhosts else self._vhost(vhost)
        return await self._send(calls.consumer_groups(scope))

    async def delete_consumer_group(self, group: str, *, vhost: str | None = None) -> None:
        await self._send(calls.delete_consumer_group(self._vhost(vhost), group))

    # ---------------------------------------------------------------- cluster

    async def cluster_status(self) -> dict[str, Any]:
        """The cluster as the node asked sees it: `node` (that node), `leader`, `term`,
        `nodes` [{name, host, cluster_port, role, status, since_ms, connected, ...}]."""
        return await self._send(calls.cluster_status())

    async def sync_queue(self, queue: str, vhost: str = "/") -> None:
        """Members of a replicated queue that are not in sync copy it all (ha-sync-mode
        manual)."""
        await self._send(calls.queue_action(vhost, queue, "sync"))

    async def cancel_sync_queue(self, queue: str, vhost: str = "/") -> None:
        await self._send(calls.queue_action(vhost, queue, "cancel_sync"))

    async def transfer_queue_leader(self, queue: str, node: str | None = None,
                                    vhost: str = "/") -> str:
        """Move a replicated queue's leader to `node` (None: its best in-sync follower);
        returns the new leader."""
        answer = await self._send(calls.queue_action(vhost, queue, "transfer_leader", node))
        return str(answer["leader"])

    async def rebalance_queue_leaders(self) -> list[dict[str, str]]:
        """Spread replicated queues' leaders evenly; the moves made."""
        return await self._send(calls.rebalance_queues())

    async def add_cluster_node(self, name: str, host: str, cluster_port: int = 25672) -> None:
        """Make the node `name` (started with `--join`) a member of the cluster."""
        await self._send(calls.add_cluster_node(name, host, cluster_port))

    async def remove_cluster_node(self, name: str) -> None:
        """Remove the node `name` from the cluster and forget it."""
        await self._send(calls.remove_cluster_node(name))

    # ---------------------------------------------------------------- data plane

    async def publish(self, exchange: str, routing_key: str, body: bytes | str,
                      properties: Properties | None = None, *, vhost: str | None = None
                      ) -> PublishResult:
        message = OutgoingMessage(routing_key, body, properties)
        return await self._send(calls.publish(self._vhost(vhost), exchange, message))

    async def publish_batch(self, exchange: str,
                            messages: Iterable[OutgoingMessage | bytes | str], *,
                            routing_key: str = "", properties: Properties | None = None,
                            batch_size: int = 1000, vhost: str | None = None
                            ) -> list[PublishResult]:
        """Publish in order, `batch_size` per request; one result per message, in order."""
        results: list[PublishResult] = []
        items = outgoing(messages, routing_key, properties)
        for target, batch in batches(exchange, items, batch_size):
            call = calls.publish_batch(self._vhost(vhost), target, batch)
            sent: list[PublishResult] = await self._send(call)
            results.extend(sent)
        return results

    async def stage_batch(self, producer: str, seq: int,
                          messages: Iterable[OutgoingMessage | bytes | str], *, exchange: str = "",
                          routing_key: str = "", properties: Properties | None = None,
                          part_size: int = 1000, vhost: str | None = None) -> list[str]:
        """Stage messages as parts of transactional batch `seq` of `producer`; the parts'
        tokens, to commit with `commit_batch`. Nothing is routable until the commit."""
        parts: list[str] = []
        items = list(outgoing(messages, routing_key, properties))
        for start in range(0, len(items), part_size):
            call = calls.stage_part(self._vhost(vhost), producer, seq, exchange,
                                    items[start:start + part_size])
            parts.append(await self._send(call))
        return parts

    async def commit_batch(self, producer: str, seq: int, parts: Sequence[str], *,
                           vhost: str | None = None) -> dict[str, Any]:
        """Publish the listed parts of batch `seq` at once, at most once per (producer, seq):
        `{"committed": true, "duplicate": bool, "messages": n, ...}`."""
        return await self._send(calls.commit_batch(self._vhost(vhost), producer, seq, parts))

    async def abort_batch(self, producer: str, seq: int, *, vhost: str | None = None
                          ) -> dict[str, Any]:
        return await self._send(calls.abort_batch(self._vhost(vhost), producer, seq))

    async def producer(self, producer: str, *, vhost: str | None = None) -> dict[str, Any]:
        """A transactional producer: its last committed batches and its open ones."""
        return await self._send(calls.producer(self._vhost(vhost), producer))

    async def get(self, queue: str, count: int = 1, *, ackmode: str = "ack_requeue_true",
                  vhost: str | None = None) -> list[GotMessage]:
        return await self._send(calls.get(self._vhost(vhost), queue, count, ackmode))

    async def lease(self, queue: str, count: int = 1, *, visibility_timeout_ms: int = 30_000,
                    vhost: str | None = None) -> list[GotMessage]:
        return await self._send(calls.lease(self._vhost(vhost), queue, count,
                                            visibility_timeout_ms))

    async def ack(self, queue: str, delivery_tags: Sequence[int], *,
                  vhost: str | None = None) -> SettleResult:
        return await self._send(calls.settle(self._vhost(vhost), queue, "ack", delivery_tags,
                                             False))

    async def nack(self, queue: str, delivery_tags: Sequence[int], *, requeue: bool = True,
                   vhost: str | None = None) -> SettleResult:
        return await self._send(calls.settle(self._vhost(vhost), queue, "nack", delivery_tags,
                                             requeue))

    async def reject(self, queue: str, delivery_tags: Sequence[int], *, requeue: bool = True,
                     vhost: str | None = None) -> SettleResult:
        return await self._send(calls.settle(self._vhost(vhost), queue, "reject", delivery_tags,
                                             requeue))

    async def replay_pages(self, queue: str, *, from_offset: int | None = None,
                           from_timestamp: int | None = None, to_offset: int | None = None,
                           page_size: int = 1000, max_bytes: int = 1 << 20,
                           vhost: str | None = None) -> AsyncIterator[ReplayPage]:
        """The REST replay, page by page, up to the end of the log (or `to_offset`)."""
        cursor = ReplayCursor(from_offset, from_timestamp, to_offset)
        while not cursor.done:
            page = await self._send(cursor.call(self._vhost(vhost), queue, page_size, max_bytes))
            cursor.advance(page)
            yield page

    def replay(self, queue: str, *, from_offset: int | None = None,
               from_timestamp: int | None = None, to_offset: int | None = None,
               follow: bool = False, page_size: int = 1000, vhost: str | None = None
               ) -> AsyncIterator[Record]:
        """Read the queue's log (non-destructively): REST pages, or a WebSocket when following."""
        if follow:
            return self.follow(queue, from_offset=from_offset, from_timestamp=from_timestamp,
                               to_offset=to_offset, vhost=vhost)
        return self._records(self.replay_pages(
            queue, from_offset=from_offset, from_timestamp=from_timestamp, to_offset=to_offset,
            page_size=page_size, vhost=vhost))

    @staticmethod
    async def _records(pages: AsyncIterator[ReplayPage]) -> AsyncIterator[Record]:
        async for page in pages:
            for record in page.records:
                yield record

    def follow(self, queue: str, *, from_offset: int | None = None,
               from_timestamp: int | None = None, to_offset: int | None = None,
               vhost: str | None = None) -> AsyncReplayStream:
        """Replay over a WebSocket, then keep streaming new records (until `to_offset`)."""
        return AsyncReplayStream(self._ring, self._vhost(vhost), queue, from_offset,
                                 from_timestamp, to_offset, follow=True)

    def consume(self, queue: str, *, prefetch: int = 100, no_ack: bool = False,
                consumer_tag: str | None = None, arguments: Mapping[str, Any] | None = None,
                vhost: str | None = None) -> AsyncConsumer:
        """A WebSocket consumer: `async with client.consume(q) as c: async for d in c: ...`."""
        return AsyncConsumer(self._ring, self._vhost(vhost), queue, prefetch, no_ack,
                             consumer_tag, arguments)

    def publisher(self, *, max_batch: int = 1000, max_in_flight: int = 8,
                  linger_s: float = 0.002, vhost: str | None = None) -> AsyncPublisher:
        """A WebSocket publisher with confirms, many messages per frame, frames in flight."""
        return AsyncPublisher(self._ring, self._vhost(vhost), max_batch, max_in_flight,
                              linger_s)
