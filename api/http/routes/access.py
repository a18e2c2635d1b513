"""Vhosts, users and permissions: /api/vhosts, /api/users, /api/permissions."""

from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter, Depends, Response
from pydantic import Field

from api.http.api_context import ApiContext, api_context
from api.http.auth import Principal, admin_user, management_user, visible_vhost, visible_vhosts
from api.http.http_errors import ApiError
from api.http.path_names import path_name
from api.http.query_params import ListOptions
from api.http.request_body import RequestBody
from logbroker.metadata import (
    AddVhost,
    ClearPermissions,
    DeleteUser,
    DeleteVhost,
    PutUser,
    SetPermissions,
    hash_password,
)
from logbroker.metadata.passwords import SHA256

router = APIRouter(tags=["access"])
Context = Depends(api_context)
Management = Depends(management_user)
Admin = Depends(admin_user)


def created_or_updated(existed: bool) -> Response:
    return Response(status_code=204 if existed else 201)


def split_tags(tags: str | list[str] | None) -> tuple[str, ...]:
    if tags is None:
        return ()
    items = tags.split(",") if isinstance(tags, str) else tags
    return tuple(sorted({tag.strip() for tag in items if tag.strip()}))


# ----------------------------------------------------------------------------- vhosts

class VhostBody(RequestBody):
    description: str = ""
    tags: str | list[str] | None = None
    default_queue_type: str | None = None


def vhost_view(ctx: ApiContext, name: str) -> dict[str, Any]:
    record = ctx.broker.state.vhost(name)
    assert record is not None
    shells = ctx.broker.queues_of(name)
    return {"name": name, "description": record.description, "tags": list(record.tags),
            "metadata": {"description": record.description, "tags": list(record.tags)},
            "messages": sum(s.core.message_count + s.core.unacked_count for s in shells),
            "messages_ready": sum(s.core.message_count for s in shells),
            "messages_unacknowledged": sum(s.core.unacked_count for s in shells),
            "tracing": False}


@router.get("/api/vhosts", dependencies=[ListOptions])
async def list_vhosts(ctx: ApiContext = Context, who: Principal = Management
                      ) -> list[dict[str, Any]]:
    return [vhost_view(ctx, name) for name in visible_vhosts(ctx, who)]


@router.get("/api/vhosts/{vhost}")
async def get_vhost(vhost: str, ctx: ApiContext = Context, who: Principal = Management
              ) -> dict[str, Any]:
    name = path_name(vhost)
    visible_vhost(ctx, who, name)
    return vhost_view(ctx, name)


@router.put("/api/vhosts/{vhost}", status_code=201, responses={204: {}})
async def put_vhost(vhost: str, body: VhostBody | None = None, ctx: ApiContext = Context,
              _who: Principal = Admin) -> Response:
    name = path_name(vhost)
    body = body or VhostBody()
    existed = ctx.broker.state.vhost(name) is not None
    await ctx.broker.apply(AddVhost(name, body.description, split_tags(body.tags)))
    return created_or_updated(existed)


@router.delete("/api/vhosts/{vhost}", status_code=204)
async def delete_vhost(vhost: str, ctx: ApiContext = Context, _who: Principal = Admin) -> Response:
    name = path_name(vhost)
    if ctx.broker.state.vhost(name) is None:
        raise ApiError(404, f"vhost '{name}' not found")
    await ctx.broker.apply(DeleteVhost(name))
    return Response(status_code=204)


# ------------------------------------------------------------------------------ users

class UserBody(RequestBody):
    password: str | None = None
    password_hash: str | None = None
    hashing_algorithm: str = SHA256
    tags: str | list[str] | None = Field(default=None)


def user_view(name: str, password_hash: str, algorithm: str, tags: tuple[str, ...]
              ) -> dict[str, Any]:
    return {"name": name, "password_hash": password_hash, "hashing_algorithm": algorithm,
            "tags": list(tags), "limits": {}}


@router.get("/api/users", dependencies=[ListOptions])
async def list_users(ctx: ApiContext = Context, _who: Principal = Admin) -> list[dict[str, Any]]:
    return [user_view(u.name, u.password_hash, u.hashing_algorithm, u.tags)
            for u in ctx.broker.state.users()]


@router.get("/api/users/{user}")
async def get_user(user: str, ctx: ApiContext = Context, _who: Principal = Admin) -> dict[str, Any]:
    record = ctx.broker.state.user(path_name(user))
    if record is None:
        raise ApiError(404, f"user '{path_name(user)}' not found")
    return user_view(record.name, record.password_hash, record.hashing_algorithm, record.tags)


@router.put("/api/users/{user}", status_code=201, responses={204: {}})
async def put_user(user: str, body: UserBody, ctx: ApiContext = Context, _who: Principal = Admin
             ) -> Response:
    name = path_name(user)
    if not name:
        raise ApiError(400, "a user needs a name", "name")
    existing = ctx.broker.state.user(name)
    if body.password is not None:
        password_hash, algorithm = hash_password(body.password, os.urandom(4)), SHA256
    elif body.password_hash is not None:
        password_hash, algorithm = body.password_hash, body.hashing_algorithm
    elif existing is not None:
        password_hash, algorithm = existing.password_hash, existing.hashing_algorithm
    else:
        raise ApiError(400, "password or password_hash is required", "password")
    await ctx.broker.apply(PutUser(name, password_hash, algorithm, split_tags(body.tags)))
    return created_or_updated(existing is not None)


@router.delete("/api/users/{user}", status_code=204)
async def delete_user(user: str, ctx: ApiContext = Context, _who: Principal = Admin) -> Response:
    name = path_name(user)
    if ctx.broker.state.user(name) is None:
        raise ApiError(404, f"user '{name}' not found")
    await ctx.broker.apply(DeleteUser(name))
    return Response(status_code=204)


# ------------------------------------------------------------------------ permissions

class PermissionsBody(RequestBody):
    configure: str
    write: str
    read: str


@router.get("/api/permissions", dependencies=[ListOptions])
async def list_permissions(ctx: ApiContext = Context, _who: Principal = Admin
                     ) -> list[dict[str, Any]]:
    return [p.to_json() for p in ctx.broker.state.all_permissions()]


@router.get("/api/users/{user}/permissions", dependencies=[ListOptions])
async def user_permissions(user: str, ctx: ApiContext = Context, _who: Principal = Admin
                     ) -> list[dict[str, Any]]:
    name = path_name(user)
    return [p.to_json() for p in ctx.broker.state.all_permissions() if p.user == name]


@router.get("/api/vhosts/{vhost}/permissions", dependencies=[ListOptions])
async def vhost_permissions(vhost: str, ctx: ApiContext = Context, _who: Principal = Admin
                      ) -> list[dict[str, Any]]:
    name = path_name(vhost)
    if ctx.broker.state.vhost(name) is None:
        raise ApiError(404, f"vhost '{name}' not found")
    return [p.to_json() for p in ctx.broker.state.all_permissions() if p.vhost == name]


@router.get("/api/permissions/{vhost}/{user}")
async def get_permissions(vhost: str, user: str, ctx: ApiContext = Context, _who: Principal = Admin
                    ) -> dict[str, Any]:
    record = ctx.broker.state.permissions(path_name(user), path_name(vhost))
    if record is None:
        raise ApiError(404, f"no permissions for user '{path_name(user)}' "
                            f"in vhost '{path_name(vhost)}'")
    return record.to_json()


@router.put("/api/permissions/{vhost}/{user}", status_code=201, responses={204: {}})
async def put_permissions(vhost: str, user: str, body: PermissionsBody, ctx: ApiContext = Context,
                    _who: Principal = Admin) -> Response:
    vhost_name, user_name = path_name(vhost), path_name(user)
    if ctx.broker.state.vhost(vhost_name) is None:
        raise ApiError(404, f"vhost '{vhost_name}' not found")
    if ctx.broker.state.user(user_name) is None:
        raise ApiError(404, f"user '{user_name}' not found")
    existed = ctx.broker.state.permissions(user_name, vhost_name) is not None
    await ctx.broker.apply(SetPermissions(user_name, vhost_name, body.configure, body.write,
                                    body.read))
    return created_or_updated(existed)


@router.delete("/api/permissions/{vhost}/{user}", status_code=204)
async def delete_permissions(vhost: str, user: str, ctx: ApiContext = Context,
                       _who: Principal = Admin) -> Response:
    vhost_name, user_name = path_name(vhost), path_name(user)
    if ctx.broker.state.permissions(user_name, vhost_name) is None:
        raise ApiError(404, f"no permissions for user '{user_name}' in vhost '{vhost_name}'")
    await ctx.broker.apply(ClearPermissions(user_name, vhost_name))
    return Response(status_code=204)
