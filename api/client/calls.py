"""Every REST request the client makes, as data: a `Call` (method, path, body, parser).

The async and the sync client share these builders and differ only in how
they send a Call (see `AsyncClient._send` / `Client._send`). Names in paths are
percent-encoded with nothing safe, so vhost `/` is `%2F`; the default
exchange is `amq.default` in a path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from api.client.errors import NotFound, ProtocolError, error_from_response
from api.client.messages import (
    GotMessage,
    OutgoingMessage,
    PublishResult,
    Record,
    ReplayPage,
    SettleResult,
)

T = TypeVar("T")
MAX_BATCH = 10_000
GET_ACKMODES = ("ack_requeue_true", "ack_requeue_false", "reject_requeue_true",
                "reject_requeue_false")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request; `idempotent` ones are retried on another node after a connection error."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    body: Any = None
    params: Mapping[str, Any] | None = None
    idempotent: bool = True


def answer(response: httpx.Response, call: Call[T]) -> T:
    """The parsed answer, or the exception for an error status."""
    if response.status_code >= 400:
        raise error_from_response(response.status_code, response.content)
    try:
        return call.parse(response)
    except (ValueError, KeyError, TypeError) as error:
        raise ProtocolError(f"unexpected answer to {call.method} {call.path}: {error}") from error


def segment(name: str) -> str:
    return quote(name, safe="")


def exchange_segment(name: str) -> str:
    return segment(name or "amq.default")


def _nothing(_response: httpx.Response) -> None:
    return None


def _object(response: httpx.Response) -> dict[str, Any]:
    data = response.json()
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    return data


def _objects(response: httpx.Response) -> list[dict[str, Any]]:
    data = response.json()
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise ValueError("expected a JSON list of objects")
    return data


def _scoped(kind: str, vhost: str | None) -> str:
    return f"/api/{kind}" if vhost is None else f"/api/{kind}/{segment(vhost)}"


# ------------------------------------------------------------------- management

def overview() -> Call[dict[str, Any]]:
    return Call("GET", "/api/overview", _object)


def whoami() -> Call[dict[str, Any]]:
    return Call("GET", "/api/whoami", _object)


def listing(kind: str, vhost: str | None) -> Call[list[dict[str, Any]]]:
    """GET /api/{queues,exchanges,bindings,policies}[/{vhost}], or connections / consumers."""
    if kind in ("connections", "consumers"):
        return Call("GET", f"/api/{kind}", _objects)
    return Call("GET", _scoped(kind, vhost), _objects)


def declare_queue(vhost: str, name: str, durable: bool, auto_delete: bool,
                  arguments: Mapping[str, Any] | None) -> Call[None]:
    body = {"durable": durable, "auto_delete": auto_delete, "arguments": dict(arguments or {})}
    return Call("PUT", f"/api/queues/{segment(vhost)}/{segment(name)}", _nothing, body)


def declare_exchange(vhost: str, name: str, kind: str, durable: bool, auto_delete: bool,
                     internal: bool, arguments: Mapping[str, Any] | None) -> Call[None]:
    body = {"type": kind, "durable": durable, "auto_delete": auto_delete, "internal": internal,
            "arguments": dict(arguments or {})}
    return Call("PUT", f"/api/exchanges/{segment(vhost)}/{exchange_segment(name)}", _nothing,
                body)


def _binding_path(vhost: str, source: str, destination: str, destination_type: str) -> str:
    kind = {"queue": "q", "exchange": "e", "q": "q", "e": "e"}.get(destination_type)
    if kind is None:
        raise ValueError(f"destination_type must be 'queue' or 'exchange', "
                         f"not {destination_type!r}")
    return (f"/api/bindings/{segment(vhost)}/e/{exchange_segment(source)}/{kind}/"
            f"{segment(destination)}")


def bind(vhost: str, source: str, destination: str, destination_type: str, routing_key: str,
         arguments: Mapping[str, Any] | None) -> Call[None]:
    body = {"routing_key": routing_key, "arguments": dict(arguments or {})}
    return Call("POST", _binding_path(vhost, source, destination, destination_type), _nothing,
                body)


def bindings_between(vhost: str, source: str, destination: str, destination_type: str
                     ) -> Call[list[dict[str, Any]]]:
    return Call("GET", _binding_path(vhost, source, destination, destination_type), _objects)


def delete_binding(vhost: str, source: str, destination: str, destination_type: str,
                   properties_key: str) -> Call[None]:
    path = _binding_path(vhost, source, destination, destination_type)
    return Call("DELETE", f"{path}/{segment(properties_key)}", _nothing)


def binding_key(views: Sequence[Mapping[str, Any]], routing_key: str,
                arguments: Mapping[str, Any] | None) -> str:
    """The `properties_key` of the binding with this routing key and these arguments."""
    for view in views:
        if view.get("routing_key") == routing_key and \
                (view.get("arguments") or {}) == dict(arguments or {}):
            return str(view["properties_key"])
    raise NotFound(f"no binding with routing key {routing_key!r} and these arguments")


def delete_queue(vhost: str, name: str, if_unused: bool, if_empty: bool) -> Call[None]:
    params = {k: "true" for k, on in (("if-unused", if_unused), ("if-empty", if_empty)) if on}
    return Call("DELETE", f"/api/queues/{segment(vhost)}/{segment(name)}", _nothing,
                params=params)


def delete_exchange(vhost: str, name: str, if_unused: bool) -> Call[None]:
    params = {"if-unused": "true"} if if_unused else {}
    return Call("DELETE", f"/api/exchanges/{segment(vhost)}/{exchange_segment(name)}", _nothing,
                params=params)


def purge(vhost: str, name: str) -> Call[None]:
    return Call("DELETE", f"/api/queues/{segment(vhost)}/{segment(name)}/contents", _nothing)


def set_policy(vhost: str, name: str, pattern: str, definition: Mapping[str, Any],
               priority: int, apply_to: str) -> Call[None]:
    body = {"pattern": pattern, "definition": dict(definition), "priority": priority,
            "apply-to": apply_to}
    return Call("PUT", f"/api/policies/{segment(vhost)}/{segment(name)}", _nothing, body)


def clear_policy(vhost: str, name: str) -> Call[None]:
    return Call("DELETE", f"/api/policies/{segment(vhost)}/{segment(name)}", _nothing)


def _parameter_path(component: str, vhost: str, name: str) -> str:
    return f"/api/parameters/{segment(component)}/{segment(vhost)}/{segment(name)}"


def set_parameter(component: str, vhost: str, name: str, value: Mapping[str, Any]
                  ) -> Call[None]:
    return Call("PUT", _parameter_path(component, vhost, name), _nothing,
                {"value": dict(value)})


def clear_parameter(component: str, vhost: str, name: str) -> Call[None]:
    return Call("DELETE", _parameter_path(component, vhost, name), _nothing)


def parameters(component: str | None, vhost: str | None) -> Call[list[dict[str, Any]]]:
    """GET /api/parameters[/{component}[/{vhost}]] (a vhost only with a component)."""
    if component is None:
        return Call("GET", "/api/parameters", _objects)
    path = f"/api/parameters/{segment(component)}"
    return Call("GET", path if vhost is None else f"{path}/{segment(vhost)}", _objects)


def add_user(name: str, password: str, tags: Sequence[str]) -> Call[None]:
    body = {"password": password, "tags": ",".join(tags)}
    return Call("PUT", f"/api/users/{segment(name)}", _nothing, body)


def set_permissions(vhost: str, user: str, configure: str, write: str, read: str
                    ) -> Call[None]:
    body = {"configure": configure, "write": write, "read": read}
    return Call("PUT", f"/api/permissions/{segment(vhost)}/{segment(user)}", _nothing, body)


def export_definitions() -> Call[dict[str, Any]]:
    return Call("GET", "/api/definitions", _object)


def import_definitions(document: Mapping[str, Any]) -> Call[None]:
    return Call("POST", "/api/definitions", _nothing, dict(document))  # additive: idempotent


# ------------------------------------------------------------------- consumer groups

def _group_path(vhost: str, group: str) -> str:
    return f"/api/consumer-groups/{segment(vhost)}/{segment(group)}"


def commit_group_offsets(vhost: str, group: str, offsets: Mapping[str, int]) -> Call[None]:
    """PUT the group's next offsets (merged; absolute values, so a retry is harmless)."""
    return Call("PUT", _group_path(vhost, group), _nothing, {"offsets": dict(offsets)})


def consumer_group(vhost: str, group: str) -> Call[dict[str, Any]]:
    return Call("GET", _group_path(vhost, group), _object)


def consumer_groups(vhost: str | None) -> Call[list[dict[str, Any]]]:
    return Call("GET", _scoped("consumer-groups", vhost), _objects)


def delete_consumer_group(vhost: str, group: str) -> Call[None]:
    return Call("DELETE", _group_path(vhost, group), _nothing)


# ------------------------------------------------------------------- cluster

def federation_links(vhost: str | None) -> Call[list[dict[str, Any]]]:
    """GET /api/federation-links[/{vhost}]: the links the node asked runs."""
    return Call("GET", _scoped("federation-links", vhost), _objects)


def shovels(vhost: str | None) -> Call[list[dict[str, Any]]]:
    """GET /api/shovels[/{vhost}]: the dynamic shovels the node asked runs."""
    return Call("GET", _scoped("shovels", vhost), _objects)


def cluster_status() -> Call[dict[str, Any]]:
    """GET /api/cluster: membership, Raft leader and term, each node's liveness."""
    return Call("GET", "/api/cluster", _object)


def add_cluster_node(name: str, host: str, cluster_port: int) -> Call[None]:
    # Not retried elsewhere after a lost connection: a membership change is reported, not
    # silently repeated (running it again is safe: a member already there answers 204).
    body = {"name": name, "host": host, "cluster_port": cluster_port}
    return Call("POST", "/api/cluster/nodes", _nothing, body, idempotent=False)


def remove_cluster_node(name: str) -> Call[None]:
    return Call("DELETE", f"/api/cluster/nodes/{segment(name)}", _nothing, idempotent=False)


def queue_action(vhost: str, queue: str, action: str, node: str | None = None
                 ) -> Call[dict[str, Any]]:
    """POST /api/queues/{vhost}/{name}/actions: sync, cancel_sync or transfer_leader."""
    body: dict[str, Any] = {"action": action}
    if node is not None:
        body["node"] = node

    def parse(response: httpx.Response) -> dict[str, Any]:
        return {} if response.status_code == 204 else _object(response)
    # A leadership move is reported, not silently repeated on another node.
    return Call("POST", f"/api/queues/{segment(vhost)}/{segment(queue)}/actions", parse,
                body, idempotent=action != "transfer_leader")


def rebalance_queues() -> Call[list[dict[str, str]]]:
    def parse(response: httpx.Response) -> list[dict[str, str]]:
        return list(_object(response)["moves"])
    return Call("POST", "/api/rebalance/queues", parse, {}, idempotent=False)


# ------------------------------------------------------------------- data plane

def publish(vhost: str, exchange: str, message: OutgoingMessage) -> Call[PublishResult]:
    return Call("POST", f"/api/exchanges/{segment(vhost)}/{exchange_segment(exchange)}/publish",
                lambda response: PublishResult.from_json(response.json()), message.wire(),
                idempotent=False)


def publish_batch(vhost: str, exchange: str, messages: Sequence[OutgoingMessage]
                  ) -> Call[list[PublishResult]]:
    def parse(response: httpx.Response) -> list[PublishResult]:
        results = [PublishResult.from_json(item) for item in _object(response)["results"]]
        if len(results) != len(messages):
            raise ValueError(f"{len(results)} results for {len(messages)} messages")
        return results

    path = f"/api/exchanges/{segment(vhost)}/{exchange_segment(exchange)}/publish-batch"
    return Call("POST", path, parse, {"messages": [m.wire() for m in messages]},
                idempotent=False)


def _producer_path(vhost: str, producer: str) -> str:
    return f"/api/producers/{segment(vhost)}/{segment(producer)}"


def stage_part(vhost: str, producer: str, seq: int, exchange: str,
               messages: Sequence[OutgoingMessage]) -> Call[str]:
    """One part of a transactional batch. Safe to retry: a part staged twice is
    harmless, since a commit publishes only the parts it lists."""
    body = {"exchange": exchange, "messages": [m.wire() for m in messages]}
    return Call("POST", f"{_producer_path(vhost, producer)}/batches/{seq}/parts",
                lambda response: str(_object(response)["part"]), body)


def commit_batch(vhost: str, producer: str, seq: int, parts: Sequence[str]
                 ) -> Call[dict[str, Any]]:
    """Idempotent by design: a second commit answers `duplicate` and publishes nothing."""
    return Call("POST", f"{_producer_path(vhost, producer)}/batches/{seq}/commit", _object,
                {"parts": list(parts)})


def abort_batch(vhost: str, producer: str, seq: int) -> Call[dict[str, Any]]:
    return Call("POST", f"{_producer_path(vhost, producer)}/batches/{seq}/abort", _object)


def producer(vhost: str, name: str) -> Call[dict[str, Any]]:
    return Call("GET", _producer_path(vhost, name), _object)


def _messages(response: httpx.Response) -> list[GotMessage]:
    data = response.json()
    items = data["messages"] if isinstance(data, dict) else data
    return [GotMessage.from_json(item) for item in items]


def get(vhost: str, queue: str, count: int, ackmode: str) -> Call[list[GotMessage]]:
    if ackmode not in GET_ACKMODES:
        raise ValueError(f"ackmode must be one of {', '.join(GET_ACKMODES)}")
    body = {"count": count, "ackmode": ackmode, "encoding": "auto"}
    return Call("POST", f"/api/queues/{segment(vhost)}/{segment(queue)}/get", _messages, body,
                idempotent=False)


def lease(vhost: str, queue: str, count: int, visibility_timeout_ms: int
          ) -> Call[list[GotMessage]]:
    body = {"count": count, "visibility_timeout_ms": visibility_timeout_ms, "encoding": "auto"}
    return Call("POST", f"/api/queues/{segment(vhost)}/{segment(queue)}/lease", _messages, body,
                idempotent=False)


def settle(vhost: str, queue: str, verb: str, tags: Sequence[int], requeue: bool
           ) -> Call[SettleResult]:
    def parse(response: httpx.Response) -> SettleResult:
        data = _object(response)
        return SettleResult([int(t) for t in data.get("settled", [])],
                            [int(t) for t in data.get("unknown", [])])

    body = {"delivery_tags": list(tags), "requeue": requeue}
    return Call("POST", f"/api/queues/{segment(vhost)}/{segment(queue)}/{verb}", parse, body,
                idempotent=False)


def replay_page(vhost: str, queue: str, from_offset: int | None, from_timestamp: int | None,
                to_offset: int | None, max_messages: int, max_bytes: int) -> Call[ReplayPage]:
    params: dict[str, Any] = {"max_messages": max_messages, "max_bytes": max_bytes}
    for key, value in (("from_offset", from_offset), ("from_timestamp", from_timestamp),
                       ("to_offset", to_offset)):
        if value is not None:
            params[key] = value

    def parse(response: httpx.Response) -> ReplayPage:
        data = _object(response)
        return ReplayPage([Record.from_json(item) for item in data["messages"]],
                          int(data["next_offset"]), int(data["first_offset"]),
                          int(data["end_offset"]))

    return Call("GET", f"/api/queues/{segment(vhost)}/{segment(queue)}/messages", parse,
                params=params)
