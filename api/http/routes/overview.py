"""/api/overview, /api/nodes, /api/consumers, /api/whoami (connections and channels:
connections.py).

/api/nodes lists every member of the cluster with its liveness (`status` up/down and
`since_ms`), Raft `role`, whether it is the `leader` (`controller`) and how many
queues it leads; a standalone node is a cluster of one (`/api/cluster`'s document):
up since its start, its own controller, leading every queue. /api/overview's
`listeners` are every member's, as the cluster advertises them.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import APIRouter, Depends

from api.http.api_context import ApiContext, api_context
from api.http.auth import (
    Principal,
    management_user,
    monitoring_user,
    visible_vhosts,
)
from api.http.http_errors import ApiError
from api.http.path_names import path_name
from api.http.query_params import ListOptions
from api.http.rate_details import RateQuery, Rates, counted
from api.http.routes.cluster import cluster_status
from api.http.routes.connections import connection_totals
from api.http.views import LENGTHS
from logbroker.node_figures import NodeFigures
from logbroker.queue_figures import cluster_figures
from logbroker.rate_samples import Point, sum_points

router = APIRouter(tags=["overview"])
Context = Depends(api_context)
Management = Depends(management_user)
Monitoring = Depends(monitoring_user)


DELIVERIES = ("deliver_get", "deliver", "get", "redeliver", "ack")
# Summed over nodes: counted where messages come in and go out, they outlive queues.
NODE_COUNTERS = ("publish", "confirm", "return_unroutable", *DELIVERIES)
# Summed over a user's queues when the node-wide counts would tell of other vhosts.
QUEUE_COUNTERS = ("publish", *DELIVERIES)


@router.get("/api/overview")
async def get_overview(ctx: ApiContext = Context, who: Principal = Management,
                       query: RateQuery = Rates) -> dict[str, Any]:
    """Cluster-wide, as RabbitMQ's: every queue counts with its leader's figures, every
    node answering with its publishers' and queues' counts (deleted queues' included);
    rates and (asked) samples summed. A user who sees only some vhosts gets what
    their queues counted."""
    broker = ctx.broker
    vhosts = visible_vhosts(ctx, who)
    every = [(vhost, record.name) for vhost in vhosts for record in broker.state.queues(vhost)]
    now_ms = broker.clock.wall_ms()
    figures = await cluster_figures(broker, every, query.grid(now_ms), every_node=True)
    queues = [f for f in figures.queues.values() if f.leader_reachable]
    nodes = [f for f in figures.nodes.values() if f is not None]
    queue_sum = _summed([(f.counters, f.rates, f.points) for f in queues])
    node_sum = _summed([(f.counters, f.rates, f.points) for f in nodes])
    queue_totals: dict[str, Any] = {}
    counted(queue_totals, LENGTHS, *queue_sum, query.lengths, now_ms)
    message_stats: dict[str, Any] = {}
    if who.sees_all_vhosts:
        counted(message_stats, NODE_COUNTERS, *node_sum, query.msg_rates, now_ms)
    else:
        counted(message_stats, QUEUE_COUNTERS, *queue_sum, query.msg_rates, now_ms)
    connections, channels = await connection_totals(ctx)
    cluster_name = ctx.node_name if ctx.cluster is None else \
        str(ctx.cluster.status().get("cluster_name") or ctx.node_name)
    return {
        "product_name": "logbroker", "product_version": "0.1.0",
        "management_version": "0.1.0", "rabbitmq_version": "3.13.0-logbroker",
        "cluster_name": cluster_name, "node": ctx.node_name,
        "erlang_version": f"python {platform.python_version()}",
        "listeners": _listeners(ctx),
        "queue_totals": queue_totals,
        # Queues whose leader did not answer in time: not in the totals.
        "queues_unknown": len(figures.queues) - len(queues),
        "object_totals": {
            "queues": len(every),
            # + the default exchange of each vhost, as /api/exchanges lists it
            "exchanges": sum(len(broker.state.exchanges(v)) + 1 for v in vhosts),
            "connections": connections,  # every member's that answered, as RabbitMQ's
            "consumers": sum(f.consumers or 0 for f in queues),
            "channels": channels,
        },
        "message_stats": message_stats,
    }


def _listeners(ctx: ApiContext) -> list[dict[str, Any]]:
    """Every node's listeners, as RabbitMQ lists them: this node's own (TLS ones too),
    the others' as the cluster advertises them (AMQP and HTTP ports), and each member's
    cluster port as `clustering`; clustered, every address is the member's advertised
    host (where clients reach it, not a bind address such as 0.0.0.0)."""
    if ctx.cluster is None:
        return _own_listeners(ctx)
    listed: list[dict[str, Any]] = []
    for member in ctx.cluster.status().get("nodes", ()):
        name, host = member.get("name"), member.get("host")
        ports: Sequence[tuple[str, int | None]] = ctx.listeners.enabled() \
            if name == ctx.node_name else [("amqp", member.get("amqp_port")),
                                           ("http", member.get("http_port"))]
        listed += [{"node": name, "protocol": protocol, "ip_address": host, "port": port}
                   for protocol, port in ports if port]
        if member.get("cluster_port"):
            listed.append({"node": name, "protocol": "clustering", "ip_address": host,
                           "port": member["cluster_port"]})
    return listed


def _own_listeners(ctx: ApiContext) -> list[dict[str, Any]]:
    return [{"node": ctx.node_name, "protocol": protocol, "ip_address": ctx.listeners.host,
             "port": port} for protocol, port in ctx.listeners.enabled()]


Summed = tuple[dict[str, int], dict[str, float], list[Point]]


def _summed(parts: list[tuple[Mapping[str, int], Mapping[str, float], Sequence[Point]]]
            ) -> Summed:
    """Counters, rates and sample points of several objects, added up."""
    counters: dict[str, int] = {}
    rates: dict[str, float] = {}
    for values, per_second, _ in parts:
        for name, value in values.items():
            counters[name] = counters.get(name, 0) + value
        for name, rate in per_second.items():
            rates[name] = round(rates.get(name, 0.0) + rate, 2)
    return counters, rates, sum_points(points for _, _, points in parts)


def _node_view(ctx: ApiContext) -> dict[str, Any]:
    resources = ctx.broker.resources
    alarms = resources.alarms
    return {
        "name": ctx.node_name, "type": "disc", "running": True, "being_drained": False,
        "uptime": ctx.clock.wall_ms() - ctx.started_at_ms,
        "os_pid": str(os.getpid()), "processors": os.cpu_count() or 1,
        "mem_alarm": "memory" in alarms.active, "disk_free_alarm": "disk" in alarms.active,
        "mem_limit": alarms.watermarks.memory_high_bytes,
        "disk_free_limit": alarms.watermarks.disk_free_limit_bytes,
        "data_dir": ctx.broker.config.data_dir,
    }


def _cluster_node_view(ctx: ApiContext, status: dict[str, Any], member: dict[str, Any],
                       told: NodeFigures | None) -> dict[str, Any]:
    """One cluster member as /api/nodes shows it: RabbitMQ's fields plus liveness and role.

    This node's entry also has the local details (uptime, alarms, ...); another
    node's has what the cluster knows of it, and the alarms it `told` (null when it
    did not answer).
    """
    name = member.get("name")
    up = member.get("status") == "up"
    view: dict[str, Any] = _node_view(ctx) if name == ctx.node_name else \
        {"name": name, "type": "disc", "running": up, "being_drained": False,
         "mem_alarm": None if told is None else told.mem_alarm,
         "disk_free_alarm": None if told is None else told.disk_free_alarm}
    controller = name is not None and name == status.get("leader")
    view.update({
        "running": up, "status": member.get("status"), "since_ms": member.get("since_ms"),
        "role": member.get("role"), "leader": controller, "controller": controller,
        "host": member.get("host"), "cluster_port": member.get("cluster_port"),
        "amqp_port": member.get("amqp_port"), "http_port": member.get("http_port"),
        "connected": member.get("connected"), "queue_leaders": member.get("queue_leaders"),
    })
    return view


async def _node_views(ctx: ApiContext) -> list[dict[str, Any]]:
    """Every node: the cluster's members when clustered, else this node alone (a
    cluster of one, described as /api/cluster describes it)."""
    status = cluster_status(ctx)
    told = {} if ctx.cluster is None else \
        (await cluster_figures(ctx.broker, [], every_node=True)).nodes
    return [_cluster_node_view(ctx, status, member, told.get(str(member.get("name"))))
            for member in status.get("nodes", ())]


@router.get("/api/nodes", dependencies=[ListOptions])
async def get_nodes(ctx: ApiContext = Context, _who: Principal = Monitoring
                      ) -> list[dict[str, Any]]:
    return await _node_views(ctx)


@router.get("/api/nodes/{name}")
async def get_node(name: str, ctx: ApiContext = Context, _who: Principal = Monitoring
             ) -> dict[str, Any]:
    wanted = path_name(name)
    for view in await _node_views(ctx):
        if view["name"] == wanted:
            return view
    raise ApiError(404, f"node '{wanted}' not found")


@router.get("/api/consumers", dependencies=[ListOptions])
async def get_consumers(ctx: ApiContext = Context, who: Principal = Management
                  ) -> list[dict[str, Any]]:
    out = []
    for vhost in visible_vhosts(ctx, who):
        for shell in ctx.broker.queues_of(vhost):
            for tag in shell.consumer_tags():
                consumer = shell.core.roster.get(tag)
                if consumer is None:
                    continue
                out.append({
                    "consumer_tag": tag, "queue": {"name": shell.name, "vhost": vhost},
                    "channel_details": {"name": consumer.channel_key},
                    "ack_required": not consumer.no_ack, "exclusive": consumer.exclusive,
                    "prefetch_count": consumer.prefetch_count, "active": True,
                    "arguments": {"x-priority": consumer.priority} if consumer.priority else {},
                })
    return out


@router.get("/api/whoami")
async def whoami(who: Principal = Depends(management_user)) -> dict[str, Any]:  # noqa: B008
    return {"name": who.user, "tags": sorted(who.tags)}
