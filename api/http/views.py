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
from api.http.rate_details import RateQuery, counted, sampled
from logbroker.connections import ChannelInfo, ConnectionInfo
from logbroker.exchange_figures import COUNTERS as EXCHANGE_COUNTERS
from logbroker.exchange_figures import ExchangeFigures
from logbroker.metadata import ExchangeRecord, Policy, QueueRecord
from logbroker.queue.queue_shell import QueueShell
from logbroker.queue_figures import QueueFigures
from logbroker.rate_sampling import channel_key, connection_key
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


def exchange_stats(figures: ExchangeFigures, query: RateQuery, now_ms: int
                   ) -> dict[str, Any]:
    """`message_stats` of an exchange: what was published to it, on every node."""
    stats: dict[str, Any] = {}
    counted(stats, EXCHANGE_COUNTERS, figures.counters, figures.rates, figures.points,
            query.msg_rates, now_ms)
    return stats


MESSAGE_COUNTERS = ("publish", "deliver_get", "deliver", "get", "redeliver", "ack")
LENGTHS = ("messages", "messages_ready", "messages_unacknowledged")
CHANNEL_COUNTERS = ("publish", "confirm", "return_unroutable", "deliver_get", "deliver",
                    "get", "redeliver", "ack")


def queue_view(ctx: ApiContext, record: QueueRecord, shell: QueueShell | None,
               policy: Policy | None, figures: QueueFigures, query: RateQuery,
               now_ms: int) -> dict[str, Any]:
    """A queue with its leader's figures (`figures`: unknown counts are null)."""
    node = record.leader_node or ctx.node_name
    members = list(record.members) or [node]
    in_sync = list(record.in_sync) or [node]
    view: dict[str, Any] = {
        "name": record.name, "vhost": record.vhost, "durable": record.durable,
        "auto_delete": record.auto_delete, "exclusive": record.exclusive_owner is not None,
        "owner_pid_details": {"name": record.exclusive_owner} if record.exclusive_owner else {},
        "arguments": jsonable(record.arguments), "type": "classic", "state": "running",
        "node": node, "leader": node, "members": members,
        "online": [member for member in members if ctx.node_up(member)],
        "in_sync": in_sync, "epoch": record.epoch,
        "slave_nodes": [member for member in members if member != node],
        "synchronised_slave_nodes": [member for member in in_sync if member != node],
        "followers": [{"node": member, "lag": figures.follower_lags.get(member)}
                      for member in members if member != node],
        "policy": policy.name if policy else None,
        "effective_policy_definition": jsonable(policy.definition) if policy else {},
        "first_offset": figures.first_offset, "next_offset": figures.next_offset,
    }
    if figures.log_bytes is not None:  # the leader's, whichever node answers
        view.update(log_bytes=figures.log_bytes, log_segments=figures.log_segments)
    if shell is not None:
        gate = shell.replication
        if gate is not None:
            view["high_watermark"] = gate.high_watermark
            view["replica_lag"] = dict(figures.follower_lags)
    if not figures.leader_reachable:
        view["state"] = "down"  # its leader node is down, unreachable or slow: unknown
        view.update({name: None for name in (*LENGTHS, "consumers")})
        return view
    counted(view, LENGTHS, figures.counters, figures.rates, figures.points, query.lengths,
            now_ms)
    view["consumers"] = figures.consumers
    stats: dict[str, Any] = {}
    counted(stats, MESSAGE_COUNTERS, figures.counters, figures.rates, figures.points,
            query.msg_rates, now_ms)
    view["message_stats"] = stats
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


def connection_view(ctx: ApiContext, info: ConnectionInfo, query: RateQuery, now_ms: int
                    ) -> dict[str, Any]:
    view = {"name": info.connection_id, "node": ctx.node_name, "protocol": info.protocol,
            "peer_host": info.peer_host, "peer_port": info.peer_port, "user": info.user,
            "vhost": info.vhost, "channels": info.channels,
            "connected_at": info.connected_at_ms, "state": info.state,
            "auth_mechanism": info.auth_mechanism, "ssl": info.ssl,
            "client_properties": jsonable(info.client_properties),
            "frame_max": info.frame_max, "channel_max": info.channel_max,
            "timeout": info.heartbeat_s}
    sampled(view, ("recv_oct", "send_oct"), {"recv_oct": info.recv_oct,
                                             "send_oct": info.send_oct},
            ctx.broker.rates, connection_key(info.connection_id), query.data_rates, now_ms)
    return view


def channel_view(ctx: ApiContext, info: ConnectionInfo, channel: ChannelInfo,
                 query: RateQuery, now_ms: int) -> dict[str, Any]:
    """RabbitMQ's channel fields; `state` is its connection's (flow, blocked: not read)."""
    stats: dict[str, Any] = {}
    sampled(stats, CHANNEL_COUNTERS, channel.counters.as_dict(), ctx.broker.rates,
            channel_key(info.connection_id, channel.number), query.msg_rates, now_ms)
    return {"name": f"{info.connection_id} ({channel.number})", "number": channel.number,
            "node": ctx.node_name, "user": info.user, "vhost": info.vhost,
            "connection_details": {"name": info.connection_id, "peer_host": info.peer_host,
                                   "peer_port": info.peer_port},
            "prefetch_count": channel.prefetch_count,
            "global_prefetch_count": channel.global_prefetch_count,
            "messages_unacknowledged": channel.messages_unacknowledged,
            "consumer_count": channel.consumer_count, "confirm": channel.confirm,
            "transactional": channel.transactional, "state": info.state,
            "message_stats": stats}
