"""`Client`: the synchronous client. REST over httpx.Client; the WebSocket parts (consume,
replay with follow, the publisher) run the async code on a private event-loop thread.

    with Client("http://guest:guest@127.0.0.1:15672") as client:
        client.declare_queue("events")
        client.publish("", "events", b"hello")
        for record in client.replay("events", from_offset=0):
            print(record.offset, record.body)

Same methods and failover as `AsyncClient` (see there).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
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
from api.client.sync_streams import LoopThread, SyncConsumer, SyncPublisher, SyncReplay
from api.client.ws_connection import describe
from api.client.ws_publisher import AsyncPublisher
from api.client.ws_streams import AsyncConsumer, AsyncReplayStream

T = TypeVar("T")
Objects = list[dict[str, Any]]


class Client(ClientBase):
    def __init__(self, urls: str | Sequence[str] | None = None, *, vhost: str = "/",
                 timeout: float = 30.0, rounds: int = 2, backoff_s: float = 0.1,
                 tls: ssl.SSLContext | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(urls, vhost=vhost, timeout=timeout, rounds=rounds, backoff_s=backoff_s,
                         tls=tls)
        self._http = httpx.Client(timeout=self._timeouts(), transport=transport,
                                  verify=self._verify)
        self._loop = LoopThread()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()
        self._loop.close()

    def _send(self, call: Call[T]) -> T:
        problems: list[str] = []
        for attempt, node in enumerate(self._ring.attempts()):
            try:
                response = self._http.request(
                    call.method, node.base_url + call.path, params=call.params, json=call.body,
                    auth=node.auth)
                leader = self._redirect(response, node)
                if leader is not None:
                    node = leader
                    response = self._http.request(
                        call.method, leader.base_url + call.path, params=call.params,
                        json=call.body, auth=leader.auth)
            except httpx.TransportError as error:
                self._transport_failed(call, node, error, problems)
                time.sleep(self._ring.pause_after(attempt))
                continue
            return calls.answer(response, call)
        raise self._unreachable(problems)

    # ---------------------------------------------------------------- management

    def overview(self) -> dict[str, Any]:
        return self._send(calls.overview())

    def whoami(self) -> dict[str, Any]:
        return self._send(calls.whoami())

    def status(self) -> list[NodeStatus]:
        """Every node's overview, asked of each node in turn (no failover)."""
        out = []
        for node in self.nodes:
            call = calls.overview()
            try:
                response = self._http.get(node.base_url + call.path, auth=node.auth,
                                          timeout=self._probe_timeout)
                out.append(NodeStatus(str(node), True, calls.answer(response, call)))
            except httpx.TransportError as error:
                out.append(NodeStatus(str(node), False, error=describe(error)))
            except LogbrokerError as error:
                out.append(NodeStatus(str(node), False, error=f"{error.status}: {error}"))
        return out

    def _list(self, kind: str, vhost: str | None, all_vhosts: bool) -> Objects:
        scope = None if all_vhosts else self._vhost(vhost)
        return listing_filter(kind, self._send(calls.listing(kind, scope)), scope)

    def list_queues(self, vhost: str | None = None, *, all_vhosts: bool = False
                    ) -> Objects:
        return self._list("queues", vhost, all_vhosts)

    def list_exchanges(self, vhost: str | None = None, *, all_vhosts: bool = False
                       ) -> Objects:
        return self._list("exchanges", vhost, all_vhosts)

    def list_bindings(self, vhost: str | None = None, *, all_vhosts: bool = False
                      ) -> Objects:
        return self._list("bindings", vhost, all_vhosts)

    def list_policies(self, vhost: str | None = None, *, all_vhosts: bool = False
                      ) -> Objects:
        return self._list("policies", vhost, all_vhosts)

    def list_connections(self, vhost: str | None = None, *, all_vhosts: bool = True
                         ) -> Objects:
        return self._list("connections", vhost, all_vhosts)

    def list_consumers(self, vhost: str | None = None, *, all_vhosts: bool = False
                       ) -> Objects:
        return self._list("consumers", vhost, all_vhosts)

    def declare_queue(self, name: str, *, durable: bool = True, auto_delete: bool = False,
                      arguments: Mapping[str, Any] | None = None,
                      vhost: str | None = None) -> None:
        self._send(calls.declare_queue(self._vhost(vhost), name, durable, auto_delete,
                                       arguments))

    def declare_exchange(self, name: str, type: str = "direct", *, durable: bool = True,
                         auto_delete: bool = False, internal: bool = False,
                         arguments: Mapping[str, Any] | None = None,
                         vhost: str | None = None) -> None:
        self._send(calls.declare_exchange(self._vhost(vhost), name, type, durable,
                                          auto_delete, internal, arguments))

    def bind(self, source: str, destination: str, routing_key: str = "", *,
             destination_type: str = "queue", arguments: Mapping[str, Any] | None = None,
             vhost: str | None = None) -> None:
        self._send(calls.bind(self._vhost(vhost), source, destination, destination_type,
                              routing_key, arguments))

    def unbind(self, source: str, destination: str, routing_key: str = "", *,
               destination_type: str = "queue", arguments: Mapping[str, Any] | None = None,
               vhost: str | None = None) -> None:
        vh = self._vhost(vhost)
        views = self._send(calls.bindings_between(vh, source, destination,
                                                  destination_type))
        key = calls.binding_key(views, routing_key, arguments)
        self._send(calls.delete_binding(vh, source, destination, destination_type, key))

    def delete_queue(self, name: str, *, if_unused: bool = False, if_empty: bool = False,
                     vhost: str | None = None) -> None:
        self._send(calls.delete_queue(self._vhost(vhost), name, if_unused, if_empty))

    def delete_exchange(self, name: str, *, if_unused: bool = False,
                        vhost: str | None = None) -> None:
        self._send(calls.delete_exchange(self._vhost(vhost), name, if_unused))

    def purge(self, queue: str, *, vhost: str | None = None) -> None:
        self._send(calls.purge(self._vhost(vhost), queue))

    def set_policy(self, name: str, pattern: str, definition: Mapping[str, Any], *,
                   priority: int = 0, apply_to: str = "all", vhost: str | None = None
                   ) -> None:
        self._send(calls.set_policy(self._vhost(vhost), name, pattern, definition,
                                    priority, apply_to))

    def clear_policy(self, name: str, *, vhost: str | None = None) -> None:
        self._send(calls.clear_policy(self._vhost(vhost), name))

    def set_parameter(self, component: str, name: str, value: Mapping[str, Any], *,
                      vhost: str | None = None) -> None:
        """A runtime parameter (RabbitMQ's set_parameter): federation upstreams, limits."""
        self._send(calls.set_parameter(component, self._vhost(vhost), name, value))

    def clear_parameter(self, component: str, name: str, *, vhost: str | None = None
                        ) -> None:
        self._send(calls.clear_parameter(component, self._vhost(vhost), name))

    def list_parameters(self, component: str | None = None, vhost: str | None = None, *,
                        all_vhosts: bool = False) -> Objects:
        """Every vhost's parameters with `all_vhosts` (or no component), else --vhost's."""
        if all_vhosts or component is None:
            found = self._send(calls.parameters(component, None))
            return found if all_vhosts else [
                item for item in found if item.get("vhost") == self._vhost(vhost)]
        return self._send(calls.parameters(component, self._vhost(vhost)))

    def set_vhost_limits(self, limits: Mapping[str, int], *, vhost: str | None = None
                         ) -> None:
        """The vhost's limits, replacing the old ones (`max-connections`, `max-queues`;
        negative: no limit), as rabbitmqctl set_vhost_limits."""
        self.set_parameter("vhost-limits", "limits", limits, vhost=vhost)

    def clear_vhost_limits(self, *, vhost: str | None = None) -> None:
        self.clear_parameter("vhost-limits", "limits", vhost=vhost)

    def federation_links(self, vhost: str | None = None, *, all_vhosts: bool = True
                         ) -> Objects:
        """The federation links the node runs: vhost, exchange, upstream, status
        (starting / running / error), uri, messages, timestamp, error."""
        return self._send(calls.federation_links(None if all_vhosts else self._vhost(vhost)))

    def shovels(self, vhost: str | None = None, *, all_vhosts: bool = True) -> Objects:
        """The dynamic shovels the node runs: name, vhost, state (starting / running /
        terminated), src and dest, messages moved, reason of the last error."""
        return self._send(calls.shovels(None if all_vhosts else self._vhost(vhost)))

    def add_user(self, name: str, password: str, tags: Sequence[str] = ()) -> None:
        self._send(calls.add_user(name, password, tags))

    def set_permissions(self, user: str, configure: str = ".*", write: str = ".*",
                        read: str = ".*", *, vhost: str | None = None) -> None:
        self._send(calls.set_permissions(self._vhost(vhost), user, configure, write, read))

    def export_definitions(self) -> dict[str, Any]:
        return self._send(calls.export_definitions())

    def import_definitions(self, document: Mapping[str, Any]) -> None:
        self._send(calls.import_definitions(document))

    # ---------------------------------------------------------------- consumer groups

    def commit_group_offsets(self, group: str, offsets: Mapping[str, int], *,
                             vhost: str | None = None) -> None:
        """Record the group's next offset per queue (merged into what it has; a lower
        offset than stored is a reset)."""
        self._send(calls.commit_group_offsets(self._vhost(vhost), group, offsets))

    def consumer_group(self, group: str, *, vhost: str | None = None) -> dict[str, Any]:
        """`{vhost, name, queues: [{queue, committed_offset, first_offset, end_offset,
        lag}], lag}`; NotFound for an unknown group."""
        return self._send(calls.consumer_group(self._vhost(vhost), group))

    def list_consumer_groups(self, vhost: str | None = None, *, all_vhosts: bool = False
                             ) -> Objects:
        scope = None if all_vhosts else self._vhost(vhost)
        return self._send(calls.consumer_groups(scope))

    def delete_consumer_group(self, group: str, *, vhost: str | None = None) -> None:
        self._send(calls.delete_consumer_group(self._vhost(vhost), group))

    # ---------------------------------------------------------------- cluster

    def cluster_status(self) -> dict[str, Any]:
        """The cluster as the node asked sees it: `node` (that node), `leader`, `term`,
        `nodes` [{name, host, cluster_port, role, status, since_ms, connected, ...}]."""
        return self._send(calls.cluster_status())

    def sync_queue(self, queue: str, vhost: str = "/") -> None:
        """Members of a replicated queue that are not in sync copy it all (ha-sync-mode
        manual)."""
        self._send(calls.queue_action(vhost, queue, "sync"))

    def cancel_sync_queue(self, queue: str, vhost: str = "/") -> None:
        self._send(calls.queue_action(vhost, queue, "cancel_sync"))

    def transfer_queue_leader(self, queue: str, node: str | None = None,
                              vhost: str = "/") -> str:
        """Move a replicated queue's leader to `node` (None: its best in-sync follower);
        returns the new leader."""
        answer = self._send(calls.queue_action(vhost, queue, "transfer_leader", node))
        return str(answer["leader"])

    def rebalance_queue_leaders(self) -> list[dict[str, str]]:
        """Spread replicated queues' leaders evenly; the moves made."""
        return self._send(calls.rebalance_queues())

    def add_cluster_node(self, name: str, host: str, cluster_port: int = 25672) -> None:
        """Make the node `name` (started with `--join`) a member of the cluster."""
        self._send(calls.add_cluster_node(name, host, cluster_port))

    def remove_cluster_node(self, name: str) -> None:
        """Remove the node `name` from the cluster and forget it."""
        self._send(calls.remove_cluster_node(name))

    # ---------------------------------------------------------------- data plane

    def publish(self, exchange: str, routing_key: str, body: bytes | str,
                properties: Properties | None = None, *, vhost: str | None = None
                ) -> PublishResult:
        message = OutgoingMessage(routing_key, body, properties)
        return self._send(calls.publish(self._vhost(vhost), exchange, message))

    def publish_batch(self, exchange: str,
                      messages: Iterable[OutgoingMessage | bytes | str], *,
                      routing_key: str = "", properties: Properties | None = None,
                      batch_size: int = 1000, vhost: str | None = None
                      ) -> list[PublishResult]:
        """Publish in order, `batch_size` per request; one result per message, in order."""
        results: list[PublishResult] = []
        items = outgoing(messages, routing_key, properties)
        for target, batch in batches(exchange, items, batch_size):
            call = calls.publish_batch(self._vhost(vhost), target, batch)
            sent: list[PublishResult] = self._send(call)
            results.extend(sent)
        return results

    def stage_batch(self, producer: str, seq: int,
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
            parts.append(self._send(call))
        return parts

    def commit_batch(self, producer: str, seq: int, parts: Sequence[str], *,
                     vhost: str | None = None) -> dict[str, Any]:
        """Publish the listed parts of batch `seq` at once, at most once per (producer, seq):
        `{"committed": true, "duplicate": bool, "messages": n, ...}`."""
        return self._send(calls.commit_batch(self._vhost(vhost), producer, seq, parts))

    def abort_batch(self, producer: str, seq: int, *, vhost: str | None = None
                    ) -> dict[str, Any]:
        return self._send(calls.abort_batch(self._vhost(vhost), producer, seq))

    def producer(self, producer: str, *, vhost: str | None = None) -> dict[str, Any]:
        """A transactional producer: its last committed batches and its open ones."""
        return self._send(calls.producer(self._vhost(vhost), producer))

    def get(self, queue: str, count: int = 1, *, ackmode: str = "ack_requeue_true",
            vhost: str | None = None) -> list[GotMessage]:
        return self._send(calls.get(self._vhost(vhost), queue, count, ackmode))

    def lease(self, queue: str, count: int = 1, *, visibility_timeout_ms: int = 30_000,
              vhost: str | None = None) -> list[GotMessage]:
        return self._send(calls.lease(self._vhost(vhost), queue, count,
                                      visibility_timeout_ms))

    def ack(self, queue: str, delivery_tags: Sequence[int], *,
            vhost: str | None = None) -> SettleResult:
        return self._send(calls.settle(self._vhost(vhost), queue, "ack", delivery_tags,
                                       False))

    def nack(self, queue: str, delivery_tags: Sequence[int], *, requeue: bool = True,
             vhost: str | None = None) -> SettleResult:
        return self._send(calls.settle(self._vhost(vhost), queue, "nack", delivery_tags,
                                       requeue))

    def reject(self, queue: str, delivery_tags: Sequence[int], *, requeue: bool = True,
               vhost: str | None = None) -> SettleResult:
        return self._send(calls.settle(self._vhost(vhost), queue, "reject", delivery_tags,
                                       requeue))

    def replay_pages(self, queue: str, *, from_offset: int | None = None,
                     from_timestamp: int | None = None, to_offset: int | None = None,
                     page_size: int = 1000, max_bytes: int = 1 << 20,
                     vhost: str | None = None) -> Iterator[ReplayPage]:
        """The REST replay, page by page, up to the end of the log (or `to_offset`)."""
        cursor = ReplayCursor(from_offset, from_timestamp, to_offset)
        while not cursor.done:
            page = self._send(cursor.call(self._vhost(vhost), queue, page_size, max_bytes))
            cursor.advance(page)
            yield page

    def replay(self, queue: str, *, from_offset: int | None = None,
               from_timestamp: int | None = None, to_offset: int | None = None,
               follow: bool = False, page_size: int = 1000, vhost: str | None = None
               ) -> Iterator[Record]:
        """Read the queue's log (non-destructively): REST pages, or a WebSocket when following
        (then close the iterator, or use it in a `with`, to stop)."""
        if follow:
            return self.follow(queue, from_offset=from_offset, from_timestamp=from_timestamp,
                               to_offset=to_offset, vhost=vhost)
        pages = self.replay_pages(queue, from_offset=from_offset, from_timestamp=from_timestamp,
                                  to_offset=to_offset, page_size=page_size, vhost=vhost)
        return (record for page in pages for record in page.records)

    def follow(self, queue: str, *, from_offset: int | None = None,
               from_timestamp: int | None = None, to_offset: int | None = None,
               vhost: str | None = None) -> SyncReplay:
        """Replay over a WebSocket, then keep streaming new records (until `to_offset`)."""
        return SyncReplay(self._loop, AsyncReplayStream(
            self._ring, self._vhost(vhost), queue, from_offset, from_timestamp, to_offset,
            follow=True))

    def consume(self, queue: str, *, prefetch: int = 100, no_ack: bool = False,
                consumer_tag: str | None = None, arguments: Mapping[str, Any] | None = None,
                vhost: str | None = None) -> SyncConsumer:
        """A WebSocket consumer: `with client.consume(q) as c: for d in c: d.ack()`."""
        return SyncConsumer(self._loop, AsyncConsumer(
            self._ring, self._vhost(vhost), queue, prefetch, no_ack, consumer_tag, arguments))

    def publisher(self, *, max_batch: int = 1000, max_in_flight: int = 8,
                  linger_s: float = 0.002, vhost: str | None = None) -> SyncPublisher:
        """The WebSocket publisher with confirms (see `AsyncPublisher`)."""
        return SyncPublisher(self._loop, AsyncPublisher(
            self._ring, self._vhost(vhost), max_batch, max_in_flight, linger_s))
