"""/api/policies: RabbitMQ's policies (pattern, apply-to, priority, definition)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Response
from pydantic import ConfigDict, Field

from api.http.api_context import ApiContext, api_context
from api.http.auth import Principal, management_user, visible_vhost, visible_vhosts
from api.http.http_errors import ApiError
from api.http.path_names import path_name
from api.http.query_params import ListOptions
from api.http.request_body import RequestBody
from api.http.views import policy_view
from logbroker.metadata import DeletePolicy, PutPolicy

router = APIRouter(tags=["policies"])
Context = Depends(api_context)
Management = Depends(management_user)


class PolicyBody(RequestBody):
    model_config = ConfigDict(populate_by_name=True)
    pattern: str
    definition: dict[str, Any]
    priority: int = Field(0, ge=-(2**31), lt=2**31)
    apply_to: str = Field("all", alias="apply-to")


def _policymaker(ctx: ApiContext, who: Principal, vhost: str) -> None:
    visible_vhost(ctx, who, vhost)
    if not who.may_set_policies:
        raise ApiError(403, f"user '{who.user}' needs the policymaker or administrator tag")
    if not who.is_admin and ctx.broker.state.permissions(who.user, vhost) is None:
        raise ApiError(403, f"access to vhost '{vhost}' refused for user '{who.user}'")


@router.get("/api/policies", dependencies=[ListOptions])
async def list_policies(ctx: ApiContext = Context, who: Principal = Management
                  ) -> list[dict[str, Any]]:
    return [policy_view(p) for vhost in visible_vhosts(ctx, who)
            for p in ctx.broker.state.policies(vhost)]


@router.get("/api/policies/{vhost}", dependencies=[ListOptions])
async def list_vhost_policies(vhost: str, ctx: ApiContext = Context, who: Principal = Management
                        ) -> list[dict[str, Any]]:
    visible_vhost(ctx, who, path_name(vhost))
    return [policy_view(p) for p in ctx.broker.state.policies(path_name(vhost))]


def _policy(ctx: ApiContext, vhost: str, name: str) -> dict[str, Any] | None:
    for policy in ctx.broker.state.policies(vhost):
        if policy.name == name:
            return policy_view(policy)
    return None


@router.get("/api/policies/{vhost}/{name}")
async def get_policy(vhost: str, name: str, ctx: ApiContext = Context, who: Principal = Management
               ) -> dict[str, Any]:
    vhost_name, policy_name = path_name(vhost), path_name(name)
    visible_vhost(ctx, who, vhost_name)
    found = _policy(ctx, vhost_name, policy_name)
    if found is None:
        raise ApiError(404, f"no policy '{policy_name}' in vhost '{vhost_name}'")
    return found


@router.put("/api/policies/{vhost}/{name}", status_code=201, responses={204: {}})
async def put_policy(vhost: str, name: str, body: PolicyBody, ctx: ApiContext = Context,
               who: Principal = Management) -> Response:
    vhost_name, policy_name = path_name(vhost), path_name(name)
    _policymaker(ctx, who, vhost_name)
    if not policy_name:
        raise ApiError(400, "a policy needs a name", "name")
    existed = _policy(ctx, vhost_name, policy_name) is not None
    await ctx.broker.apply(PutPolicy(vhost_name, policy_name, body.pattern, body.apply_to,
                               body.priority, body.definition))
    return Response(status_code=204 if existed else 201)


@router.delete("/api/policies/{vhost}/{name}", status_code=204)
async def delete_policy(vhost: str, name: str, ctx: ApiContext = Context,
                  who: Principal = Management) -> Response:
    vhost_name, policy_name = path_name(vhost), path_name(name)
    _policymaker(ctx, who, vhost_name)
    if _policy(ctx, vhost_name, policy_name) is None:
        raise ApiError(404, f"no policy '{policy_name}' in vhost '{vhost_name}'")
    await ctx.broker.apply(DeletePolicy(vhost_name, policy_name))
    return Response(status_code=204)
