"""/api/connections and /api/channels: the client connections of every cluster member
and their channels, and closing a connection with a reason wherever it is held.

This node's own are read here; the other members' are asked for (peer_views.py) with
the same user, filters and rate history, and answered there by `local_views`, so a
listing reads the same whichever node (or worker) answers it.
"""

from __future__ import annotations

import functools
from typing import Any

from fastapi import APIRouter, Depends, Header, Response

from api.http.api_context import ApiContext, api_context
from api.http.auth import Principal, management_user, visible_vhost
from api.http.http_errors import ApiError
from api.http.path_names import path_name
from api.http.peer_views import PeerViews, ViewRequest
from api.http.query_params import ListOptions
from api.http.rate_details import RateQuery, Rates, SeriesAsk
from api.http.views import channel_view, connection_view
from logbroker.cluster.cluster_rpc import ClusterRpc

router = APIRouter(tags=["connections"])
Context = Depends(api_context)
Management = Depends(management_user)
RATE_KINDS = ("msg_rates", "lengths", "data_rates")


def _request(kind: str, who: Principal, query: RateQuery, vhost: str | None = None,
             connection: str | None = None) -> ViewRequest:
    asked = {name: getattr(query, name) for name in RATE_KINDS}
    return {"kind": kind, "user": who.user, "all": who.sees_all_vhosts, "vhost": vhost,
            "connection": connection,
            "rates": {name: [ask.age_s, ask.incr_s] for name, ask in asked.items() if ask}}


def _query(rates: Any) -> RateQuery:
    asked = rates if isinstance(rates, dict) else {}
    return RateQuery(**{name: SeriesAsk(int(asked[name][0]), int(asked[name][1]))
                        for name in RATE_KINDS if name in asked})


def local_views(ctx: ApiContext, request: ViewRequest) -> list[dict[str, Any]]:
    """The views of this node's connections (or their channels) `request` asks for."""
    infos = [info for info in ctx.broker.connections.all()
             if (request.get("all") or info.user == request.get("user"))
             and request.get("vhost") in (None, info.vhost)
             and request.get("connection") in (None, info.connection_id)]
    if request.get("kind") == "totals":
        return [{"connections": len(infos), "channels": sum(i.channels for i in infos)}]
    query, now_ms = _query(request.get("rates")), ctx.broker.clock.wall_ms()
    if request.get("kind") == "channels":
        return [channel_view(ctx, info, channel, query, now_ms) for info in infos
                for channel in info.channel_infos()]
    return [connection_view(ctx, info, query, now_ms) for info in infos]


def local_close(ctx: ApiContext, name: str, reason: str) -> bool:
    """Close connection `name` if this node holds it and it can be closed; the asking
    node checked the user's right to."""
    info = next((i for i in ctx.broker.connections.all() if i.connection_id == name), None)
    if info is None or info.close is None:
        return False
    info.close(reason)
    return True


def serve_peer_views(ctx: ApiContext, rpc: ClusterRpc) -> PeerViews:
    """The node's `PeerViews`, answering the other members with `local_views`."""
    peers = PeerViews(rpc, ctx.node_name, lambda: [
        member.name for member in ctx.broker.state.cluster_nodes() if member.up])
    peers.answer_with(functools.partial(local_views, ctx), functools.partial(local_close, ctx))
    return peers


async def _every_node(ctx: ApiContext, request: ViewRequest) -> list[dict[str, Any]]:
    here = local_views(ctx, request)
    return here if ctx.peers is None else here + await ctx.peers.gather(request)


async def connection_totals(ctx: ApiContext) -> tuple[int, int]:
    """(connections, channels) of every member that answered, for the overview."""
    every = await _every_node(ctx, {"kind": "totals", "all": True})
    return (sum(int(t.get("connections", 0)) for t in every),
            sum(int(t.get("channels", 0)) for t in every))


async def _connection(ctx: ApiContext, who: Principal, name: str) -> dict[str, Any]:
    wanted = path_name(name)
    found = await _every_node(ctx, _request("connections", who, RateQuery(),
                                            connection=wanted))
    if not found:
        raise ApiError(404, f"no connection '{wanted}'")
    return found[0]


@router.get("/api/connections", dependencies=[ListOptions])
async def get_connections(ctx: ApiContext = Context, who: Principal = Management,
                          query: RateQuery = Rates) -> list[dict[str, Any]]:
    return await _every_node(ctx, _request("connections", who, query))


@router.get("/api/connections/{name}")
async def get_connection(name: str, ctx: ApiContext = Context, who: Principal = Management,
                         query: RateQuery = Rates) -> dict[str, Any]:
    wanted = path_name(name)
    found = await _every_node(ctx, _request("connections", who, query, connection=wanted))
    if not found:
        raise ApiError(404, f"no connection '{wanted}'")
    return found[0]


@router.delete("/api/connections/{name}", status_code=204)
async def close_connection(name: str, ctx: ApiContext = Context, who: Principal = Management,
                           x_reason: str | None = Header(None, max_length=200)) -> Response:
    """Closed as RabbitMQ closes it: connection.close 320 CONNECTION_FORCED with the
    `X-Reason` header as its text, by the node that holds it. A user may close its own
    connections, an administrator any."""
    view = await _connection(ctx, who, name)
    if not who.is_admin and view["user"] != who.user:
        raise ApiError(403, f"user '{who.user}' may close only its own connections")
    reason = x_reason or "Closed via management plugin"
    closed = local_close(ctx, view["name"], reason) if view["node"] == ctx.node_name \
        else ctx.peers is not None and await ctx.peers.close(view["node"], view["name"], reason)
    if not closed:
        raise ApiError(400, f"a {view['protocol']} connection cannot be closed this way")
    return Response(status_code=204)


@router.get("/api/connections/{name}/channels", dependencies=[ListOptions])
async def get_connection_channels(name: str, ctx: ApiContext = Context,
                                  who: Principal = Management, query: RateQuery = Rates
                                  ) -> list[dict[str, Any]]:
    view = await _connection(ctx, who, name)
    return await _every_node(ctx, _request("channels", who, query, connection=view["name"]))


@router.get("/api/channels", dependencies=[ListOptions])
async def get_channels(ctx: ApiContext = Context, who: Principal = Management,
                       query: RateQuery = Rates) -> list[dict[str, Any]]:
    return await _every_node(ctx, _request("channels", who, query))


@router.get("/api/vhosts/{vhost}/channels", dependencies=[ListOptions])
async def get_vhost_channels(vhost: str, ctx: ApiContext = Context,
                             who: Principal = Management, query: RateQuery = Rates
                             ) -> list[dict[str, Any]]:
    vhost_name = path_name(vhost)
    visible_vhost(ctx, who, vhost_name)
    return await _every_node(ctx, _request("channels", who, query, vhost=vhost_name))
