"""/api/federation-links and /api/shovels: the links and dynamic shovels of every node of
the cluster (each row with its `node`) and their status, in RabbitMQ's shape."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from api.http.api_context import ApiContext, api_context
from api.http.auth import Principal, management_user, visible_vhost, visible_vhosts
from api.http.path_names import path_name
from api.http.query_params import ListOptions

router = APIRouter(tags=["federation"])
Context = Depends(api_context)
Management = Depends(management_user)


@router.get("/api/federation-links", dependencies=[ListOptions])
async def list_links(ctx: ApiContext = Context, who: Principal = Management
                     ) -> list[dict[str, Any]]:
    if ctx.federation is None:
        return []
    visible = set(visible_vhosts(ctx, who))
    return [link for link in await ctx.federation.links() if link["vhost"] in visible]


@router.get("/api/federation-links/{vhost}", dependencies=[ListOptions])
async def list_vhost_links(vhost: str, ctx: ApiContext = Context,
                           who: Principal = Management) -> list[dict[str, Any]]:
    name = path_name(vhost)
    visible_vhost(ctx, who, name)
    return [] if ctx.federation is None else await ctx.federation.links(name)


@router.get("/api/shovels", dependencies=[ListOptions])
async def list_shovels(ctx: ApiContext = Context, who: Principal = Management
                       ) -> list[dict[str, Any]]:
    if ctx.federation is None:
        return []
    visible = set(visible_vhosts(ctx, who))
    return [row for row in await ctx.federation.shovels() if row["vhost"] in visible]


@router.get("/api/shovels/{vhost}", dependencies=[ListOptions])
async def list_vhost_shovels(vhost: str, ctx: ApiContext = Context,
                             who: Principal = Management) -> list[dict[str, Any]]:
    name = path_name(vhost)
    visible_vhost(ctx, who, name)
    return [] if ctx.federation is None else await ctx.federation.shovels(name)
