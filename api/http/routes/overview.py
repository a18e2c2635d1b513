"""/api/overview, /api/nodes, /api/connections, /api/consumers, /api/whoami.

On a clustered node /api/nodes lists every member of the cluster with its liveness
(`status` up/down and `since_ms`), Raft `role` and whether it is the `leader`.
"""

from __future__ import annotations

import os
import platform
from typing import Any

from fastapi import APIRouter, Depends

from api.http.api_context import ApiContext, api_context
from api.http.auth import Principal, management_user, monitoring_user, visible_vhosts
from api.http.http_errors import ApiError
from api.http.path_names import path_name
from api.http.query_params import ListOptions
from api.http.views import connection_view
from logbroker.queue_figures import remote_figures_of

router = APIRouter(tags=["overview"])
Context = Depends(api_context)
Management = Depends(management_user)
Monitoring = Depends(monitoring_user)


@router.get("/api/overview")
async def get_overview(ctx: ApiContext = Context, who: Principal = Management) -> dict[str, Any]:
    broker = ctx.broker
    vhosts = visible_vhosts(ctx, who)
    shells = [shell for vhost in vhosts for shell in broker.queues_of(vhost)]
    every = [(vhost, record.name) for vhost in vhosts for record in broker.state.queues(vhost)]
    # Cluster-wide, as RabbitMQ's overview: queues led elsewhere count with their leaders'
    # figures (their unacked messages are not reported over the link).
    remote = await remote_figures_of(broker, [key for key in every
                                              if broker.queue(*key) is None])
    ready = (sum(s.core.message_count for s in shells)
             + sum(f.messages_ready or 0 for f in remote.values()))
    unacked = sum(s.core.unacked_count for s in shells)
    cluster_name = ctx.node_name if ctx.cluster is None else \
        str(ctx.cluster.status().get("cluster_name") or ctx.node_name)
    return {
        "product_name": "logbroker", "product_version": "0.1.0",
        "management_version": "0.1.0", "rabbitmq_version": "3.13.0-logbroker",
        "cluster_name": cluster_name, "node": ctx.node_name,
        "erlang_version": f"python {platform.python_version()}",
        "listeners": [
            {"node": ctx.node_name, "protocol": protocol, "ip_address": ctx.listeners.host,
             "port": port} for protocol, port in ctx.listeners.enabled()],
        "queue_totals": {"messages": ready + unacked, "messages_ready": ready,
                         "messages_unacknowledged": unacked},
        "object_totals": {
            "queues": len(every),
            # + the default exchange of each vhost, as /api/exchanges lists it
            "exchanges": sum(len(broker.state.exchanges(v)) + 1 for v in vhosts),
            "connections": len(broker.connections),
            "consumers": (sum(s.core.consumer_count for s in shells)
                          + sum(f.consumers or 0 for f in remote.values())),
            "channels": sum(c.channels for c in broker.connections.all()),
        },
        "message_stats": {
            "publish": sum(s.counters.published for s in shells),
            "deliver_get": sum(s.counters.delivered for s in shells),
            "ack": sum(s.counters.acked for s in shells),
        },
    }


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


def _cluster_node_view(ctx: ApiContext, status: dict[str, Any], member: dict[str, Any]
                       ) -> dict[str, Any]:
    """One cluster member as /api/nodes shows it: RabbitMQ's fields plus liveness and role.

    This node's entry also has the local details (uptime, alarms, ...); another
    node's has what the cluster knows of it.
    """
    name = member.get("name")
    up = member.get("status") == "up"
    view: dict[str, Any] = _node_view(ctx) if name == ctx.node_name else \
        {"name": name, "type": "disc", "running": up, "being_drained": False}
    view.update({
        "running": up, "status": member.get("status"), "since_ms": member.get("since_ms"),
        "role": member.get("role"), "leader": name is not None and name == status.get("leader"),
        "host": member.get("host"), "cluster_port": member.get("cluster_port"),
        "amqp_port": member.get("amqp_port"), "http_port": member.get("http_port"),
        "connected": member.get("connected"), "queue_leaders": member.get("queue_leaders"),
    })
    return view


def _node_views(ctx: ApiContext) -> list[dict[str, Any]]:
    """Every node: the cluster's members when clustered, else this node alone."""
    if ctx.cluster is None:
        return [_node_view(ctx)]
    status = ctx.cluster.status()
    return [_cluster_node_view(ctx, status, member) for member in status.get("nodes", ())]


@router.get("/api/nodes", dependencies=[ListOptions])
async def get_nodes(ctx: ApiContext = Context, _who: Principal = Monitoring
                      ) -> list[dict[str, Any]]:
    return _node_views(ctx)


@router.get("/api/nodes/{name}")
async def get_node(name: str, ctx: ApiContext = Context, _who: Principal = Monitoring
             ) -> dict[str, Any]:
    wanted = path_name(name)
    for view in _node_views(ctx):
        if view["name"] == wanted:
            return view
    raise ApiError(404, f"node '{wanted}' not found")


@router.get("/api/connections", dependencies=[ListOptions])
async def get_connections(ctx: ApiContext = Context, who: Principal = Management
                    ) -> list[dict[str, Any]]:
    return [connection_view(ctx, info) for info in ctx.broker.connections.all()
            if who.sees_all_vhosts or info.user == who.user]


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
