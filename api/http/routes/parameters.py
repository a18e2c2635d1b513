"""/api/parameters and /api/vhost-limits: runtime parameters, as RabbitMQ's HTTP API has them.

A parameter is `(vhost, component, name) -> value` (logbroker.metadata.parameters);
the vhost limits are the `vhost-limits` component's one parameter, `limits`, with
their own paths (`PUT /api/vhost-limits/{vhost}/max-connections {"value": 10}`).
Setting parameters takes the policymaker (or administrator) tag, the vhost limits
the administrator tag, as in RabbitMQ.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Response

from api.http.api_context import ApiContext, api_context
from api.http.auth import Principal, admin_user, management_user, visible_vhost, visible_vhosts
from api.http.http_errors import ApiError
from api.http.path_names import path_name
from api.http.query_params import ListOptions
from api.http.request_body import RequestBody
from logbroker.metadata import ClearParameter, SetParameter
from logbroker.metadata.parameters import VHOST_LIMIT_KEYS, VHOST_LIMITS

router = APIRouter(tags=["parameters"])
Context = Depends(api_context)
Management = Depends(management_user)
Admin = Depends(admin_user)
LIMITS = "limits"


class ParameterBody(RequestBody):
    value: dict[str, Any] | list[Any]
    # RabbitMQ's clients send these too; the path decides.
    vhost: str | None = None
    component: str | None = None
    name: str | None = None


class LimitBody(RequestBody):
    value: int


def _view(vhost: str, component: str, name: str, value: Any) -> dict[str, Any]:
    return {"vhost": vhost, "component": component, "name": name, "value": value}


def _listed(ctx: ApiContext, vhosts: list[str], component: str | None
            ) -> list[dict[str, Any]]:
    return [_view(vhost, kind, name, value) for vhost in vhosts
            for kind, name, value in ctx.broker.state.parameters(vhost, component)]


def _set(vhost: str, component: str, name: str, value: Any) -> SetParameter:
    try:
        return SetParameter.of(vhost, component, name, value)
    except ValueError as error:
        raise ApiError(400, str(error), "value") from None


def _may_set(ctx: ApiContext, who: Principal, vhost: str) -> None:
    visible_vhost(ctx, who, vhost)
    if not who.may_set_policies:
        raise ApiError(403, f"user '{who.user}' needs the policymaker or administrator tag")


@router.get("/api/parameters", dependencies=[ListOptions])
async def list_parameters(ctx: ApiContext = Context, who: Principal = Management
                          ) -> list[dict[str, Any]]:
    return _listed(ctx, visible_vhosts(ctx, who), None)


@router.get("/api/parameters/{component}", dependencies=[ListOptions])
async def list_component(component: str, ctx: ApiContext = Context,
                         who: Principal = Management) -> list[dict[str, Any]]:
    return _listed(ctx, visible_vhosts(ctx, who), path_name(component))


@router.get("/api/parameters/{component}/{vhost}", dependencies=[ListOptions])
async def list_component_in_vhost(component: str, vhost: str, ctx: ApiContext = Context,
                                  who: Principal = Management) -> list[dict[str, Any]]:
    visible_vhost(ctx, who, path_name(vhost))
    return _listed(ctx, [path_name(vhost)], path_name(component))


@router.get("/api/parameters/{component}/{vhost}/{name}")
async def get_parameter(component: str, vhost: str, name: str, ctx: ApiContext = Context,
                        who: Principal = Management) -> dict[str, Any]:
    kind, vhost_name, parameter = path_name(component), path_name(vhost), path_name(name)
    visible_vhost(ctx, who, vhost_name)
    value = ctx.broker.state.parameter(vhost_name, kind, parameter)
    if value is None:
        raise ApiError(404, f"no parameter '{parameter}' of component '{kind}' in vhost "
                            f"'{vhost_name}'")
    return _view(vhost_name, kind, parameter, value)


@router.put("/api/parameters/{component}/{vhost}/{name}", status_code=201, responses={204: {}})
async def put_parameter(component: str, vhost: str, name: str, body: ParameterBody,
                        ctx: ApiContext = Context, who: Principal = Management) -> Response:
    kind, vhost_name, parameter = path_name(component), path_name(vhost), path_name(name)
    _may_set(ctx, who, vhost_name)
    existed = ctx.broker.state.parameter(vhost_name, kind, parameter) is not None
    await ctx.broker.apply(_set(vhost_name, kind, parameter, body.value))
    return Response(status_code=204 if existed else 201)


@router.delete("/api/parameters/{component}/{vhost}/{name}", status_code=204)
async def delete_parameter(component: str, vhost: str, name: str, ctx: ApiContext = Context,
                           who: Principal = Management) -> Response:
    kind, vhost_name, parameter = path_name(component), path_name(vhost), path_name(name)
    _may_set(ctx, who, vhost_name)
    await ctx.broker.apply(ClearParameter(vhost_name, kind, parameter))
    return Response(status_code=204)


def _limits_view(ctx: ApiContext, vhost: str) -> list[dict[str, Any]]:
    value = ctx.broker.state.parameter(vhost, VHOST_LIMITS, LIMITS)
    return [{"vhost": vhost, "value": value}] if value else []


@router.get("/api/vhost-limits", dependencies=[ListOptions])
async def list_vhost_limits(ctx: ApiContext = Context, who: Principal = Management
                            ) -> list[dict[str, Any]]:
    return [view for vhost in visible_vhosts(ctx, who) for view in _limits_view(ctx, vhost)]


@router.get("/api/vhost-limits/{vhost}")
async def get_vhost_limits(vhost: str, ctx: ApiContext = Context, who: Principal = Management
                           ) -> list[dict[str, Any]]:
    vhost_name = path_name(vhost)
    visible_vhost(ctx, who, vhost_name)
    return _limits_view(ctx, vhost_name)


def _limits(ctx: ApiContext, vhost: str) -> dict[str, Any]:
    value = ctx.broker.state.parameter(vhost, VHOST_LIMITS, LIMITS)
    return dict(value) if isinstance(value, dict) else {}


def _limit_name(name: str) -> str:
    limit = path_name(name)
    if limit not in VHOST_LIMIT_KEYS:
        raise ApiError(400, f"unknown vhost limit '{limit}' (known: "
                            f"{', '.join(VHOST_LIMIT_KEYS)})", "name")
    return limit


@router.put("/api/vhost-limits/{vhost}/{name}", status_code=204)
async def put_vhost_limit(vhost: str, name: str, body: LimitBody, ctx: ApiContext = Context,
                          who: Principal = Admin) -> Response:
    vhost_name, limit = path_name(vhost), _limit_name(name)
    if ctx.broker.state.vhost(vhost_name) is None:
        raise ApiError(404, f"vhost '{vhost_name}' not found")
    current = _limits(ctx, vhost_name)
    current[limit] = body.value
    await ctx.broker.apply(_set(vhost_name, VHOST_LIMITS, LIMITS, current))
    return Response(status_code=204)


@router.delete("/api/vhost-limits/{vhost}/{name}", status_code=204)
async def delete_vhost_limit(vhost: str, name: str, ctx: ApiContext = Context,
                             who: Principal = Admin) -> Response:
    vhost_name, limit = path_name(vhost), _limit_name(name)
    current = _limits(ctx, vhost_name)
    if limit not in current:
        raise ApiError(404, f"vhost '{vhost_name}' has no limit '{limit}'")
    del current[limit]
    command = (_set(vhost_name, VHOST_LIMITS, LIMITS, current) if current
               else ClearParameter(vhost_name, VHOST_LIMITS, LIMITS))
    await ctx.broker.apply(command)
    return Response(status_code=204)
