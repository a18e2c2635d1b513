"""The JSON shapes of RabbitMQ's management API, built from the broker's records."""

from __future__ import annotations

import datetime
import decimal
import hashlib
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from api.http.api_context import ApiContext
from logbroker.connections import ConnectionInfo
from logbroker.metadata import ExchangeRecord, Policy, QueueRecord
from logbroker.queue.queue_shell import QueueShell
from logbroker.routing.types import Binding

DEFAULT_EXCHANGE_PATH_NAME = "amq.default"  # how RabbitMQ's HTTP API names "" in a path


def jsonable(value: Any) -> Any:
    """An AMQP field value as JSON (tables and arrays recursively)."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, datetime.datetime):
        return int(value.timestamp())
    return value


def exchange_view(record: ExchangeRecord, policy: Policy | None) -> dict[str, Any]:
    return {
        "name": record.name, "vhost": record.vhost, "type": record.type,
        "durable": record.durable, "auto_delete": record.auto_delete,
        "internal": record.internal, "arguments": jsonable(record.arguments),
        "policy": policy.name if policy else None, "user_who_performed_action": "",
    }


def queue_view(ctx: ApiContext, record: QueueRecord, shell: QueueShell | None,
               policy: Policy | None) -> dict[str, Any]:
    node = record.leader_node or ctx.node_name
    members = list(record.members) or [node]
    online = [member for member in members if ctx.node_up(member)]
    view: dict[str, Any] = {
        "name": record.name, "vhost": record.vhost, "durable": record.durable,
        "auto_delete": record.auto_delete, "exclusive": record.exclusive_owner is not None,
        "owner_pid_details": {"name": record.exclusive_owner} if record.exclusive_owner else {},
        "arguments": jsonable(record.arguments), "type": "classic", "state": "running",
        "node": node, "leader": node, "members": members, "online": online,
        "in_sync": list(record.in_sync) or [node], "epoch": record.epoch,
        "policy": policy.name if policy else None,
        "effective_policy_definition": jsonable(policy.definition) if policy else {},
    }
    if shell is None:
        return view
    gate = shell.replication
    if gate is not None:
        view["high_watermark"] = gate.high_watermark
        view["replica_lag"] = {member: gate.leader.lag(member) for member in members
                               if member != node}
    core, counters = shell.core, shell.counters
    rates = ctx.rates.rates(f"{record.vhost}\0{record.name}")
    view.update({
        "messages_ready": core.message_count,
        "messages_unacknowledged": core.unacked_count,
        "messages": core.message_count + core.unacked_count,
        "consumers": core.consumer_count,
        "first_offset": shell.log.log_start_offset,
        "next_offset": shell.readable_end,
        "log_bytes": shell.log.size_bytes,
        "log_segments": shell.log.segment_count,
        "message_stats": {
            "publish": counters.published,
            "publish_details": {"rate": rates.get("published", 0.0)},
            "deliver_get": counters.delivered,
            "deliver_get_details": {"rate": rates.get("delivered", 0.0)},
            "redeliver": counters.redelivered,
            "redeliver_details": {"rate": rates.get("redelivered", 0.0)},
            "ack": counters.acked,
            "ack_details": {"rate": rates.get("acked", 0.0)},
        },
    })
    return view


def properties_key(routing_key: str, arguments: Mapping[str, Any]) -> str:
    """RabbitMQ's binding id in a path: the escaped key, `~` and an argument hash."""
    if not arguments:
        return quote(routing_key, safe="") or "~"
    digest = hashlib.sha256(json.dumps(jsonable(arguments), sort_keys=True).encode())
    return f"{quote(routing_key, safe='')}~{digest.hexdigest()[:16]}"


def binding_view(vhost: str, binding: Binding) -> dict[str, Any]:
    return {
        "source": binding.source, "vhost": vhost,
        "destination": binding.destination.name,
        "destination_type": binding.destination.kind,
        "routing_key": binding.routing_key, "arguments": jsonable(binding.arguments),
        "properties_key": properties_key(binding.routing_key, binding.arguments),
    }


def default_binding_view(vhost: str, queue: str) -> dict[str, Any]:
    """Every queue is bound to the default exchange by its name (RabbitMQ lists it)."""
    return {"source": "", "vhost": vhost, "destination": queue, "destination_type": "queue",
            "routing_key": queue, "arguments": {}, "properties_key": quote(queue, safe="")}


def policy_view(policy: Policy) -> dict[str, Any]:
    return {"vhost": policy.vhost, "name": policy.name, "pattern": policy.pattern,
            "apply-to": policy.apply_to, "priority": policy.priority,
            "definition": jsonable(policy.definition)}


def connection_view(ctx: ApiContext, info: ConnectionInfo) -> dict[str, Any]:
    return {"name": info.connection_id, "node": ctx.node_name, "protocol": info.protocol,
            "peer_host": info.peer_host, "peer_port": info.peer_port, "user": info.user,
            "vhost": info.vhost, "channels": info.channels,
            "connected_at": info.connected_at_ms, "state": info.state,
            "auth_mechanism": info.auth_mechanism, "ssl": info.ssl}
