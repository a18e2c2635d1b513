"""/api/bindings: exchange-to-queue and exchange-to-exchange bindings, RabbitMQ's paths."""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import unquote

from fastapi import APIRouter, Depends, Response
from pydantic import Field

from api.http.api_context import ApiContext, api_context
from api.http.auth import Principal, management_user, session, visible_vhost, visible_vhosts
from api.http.http_errors import ApiError
from api.http.http_publish import exchange_name
from api.http.path_names import path_name
from api.http.query_params import ListOptions
from api.http.request_body import RequestBody
from api.http.views import binding_view, default_binding_view, properties_key
from logbroker.routing.types import Destination

router = APIRouter(tags=["bindings"])
Context = Depends(api_context)
Management = Depends(management_user)
Kind = Literal["q", "e"]


class BindingBody(RequestBody):
    routing_key: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)


def vhost_bindings(ctx: ApiContext, vhost: str) -> list[dict[str, Any]]:
    defaults = [default_binding_view(vhost, q.name) for q in ctx.broker.state.queues(vhost)]
    return defaults + [binding_view(vhost, b) for b in ctx.broker.state.bindings(vhost)]


def _between(ctx: ApiContext, vhost: str, source: str, kind: Kind, destination: str
             ) -> list[dict[str, Any]]:
    target = Destination("queue" if kind == "q" else "exchange", destination)
    found = [binding_view(vhost, b) for b in ctx.broker.state.bindings_to(vhost, target)
             if b.source == source]
    if source == "" and kind == "q" and ctx.broker.state.queue(vhost, destination):
        found.insert(0, default_binding_view(vhost, destination))
    return found


def _check_ends(ctx: ApiContext, vhost: str, source: str, kind: Kind, destination: str) -> None:
    if ctx.broker.state.exchange(vhost, source) is None and source != "":
        raise ApiError(404, f"no exchange '{source}' in vhost '{vhost}'")
    if kind == "q" and ctx.broker.state.queue(vhost, destination) is None:
        raise ApiError(404, f"no queue '{destination}' in vhost '{vhost}'")
    if kind == "e" and ctx.broker.state.exchange(vhost, destination) is None:
        raise ApiError(404, f"no exchange '{destination}' in vhost '{vhost}'")


@router.get("/api/bindings", dependencies=[ListOptions])
async def list_bindings(ctx: ApiContext = Context, who: Principal = Management
                  ) -> list[dict[str, Any]]:
    return [b for vhost in visible_vhosts(ctx, who) for b in vhost_bindings(ctx, vhost)]


@router.get("/api/bindings/{vhost}", dependencies=[ListOptions])
async def list_vhost_bindings(vhost: str, ctx: ApiContext = Context, who: Principal = Management
                        ) -> list[dict[str, Any]]:
    visible_vhost(ctx, who, path_name(vhost))
    return vhost_bindings(ctx, path_name(vhost))


@router.get("/api/queues/{vhost}/{name}/bindings", dependencies=[ListOptions])
async def queue_bindings(vhost: str, name: str, ctx: ApiContext = Context,
                   who: Principal = Management) -> list[dict[str, Any]]:
    vhost_name, queue = path_name(vhost), path_name(name)
    visible_vhost(ctx, who, vhost_name)
    if ctx.broker.state.queue(vhost_name, queue) is None:
        raise ApiError(404, f"no queue '{queue}' in vhost '{vhost_name}'")
    return [default_binding_view(vhost_name, queue)] + [
        binding_view(vhost_name, b)
        for b in ctx.broker.state.bindings_to(vhost_name, Destination("queue", queue))]


@router.get("/api/bindings/{vhost}/e/{source}/{kind}/{destination}", dependencies=[ListOptions])
async def list_between(vhost: str, source: str, kind: Kind, destination: str,
                 ctx: ApiContext = Context, who: Principal = Management
                 ) -> list[dict[str, Any]]:
    vhost_name = path_name(vhost)
    visible_vhost(ctx, who, vhost_name)
    src, dst = exchange_name(path_name(source)), path_name(destination)
    _check_ends(ctx, vhost_name, src, kind, dst)
    return _between(ctx, vhost_name, src, kind, dst)


@router.post("/api/bindings/{vhost}/e/{source}/{kind}/{destination}", status_code=201)
async def add_binding(vhost: str, source: str, kind: Kind, destination: str, body: BindingBody,
                ctx: ApiContext = Context, who: Principal = Management) -> Response:
    vhost_name = path_name(vhost)
    who_session = session(ctx, who, vhost_name)
    src, dst = exchange_name(path_name(source)), path_name(destination)
    if not src:
        raise ApiError(403, "the default exchange cannot be bound to")
    _check_ends(ctx, vhost_name, src, kind, dst)
    if kind == "q":
        await ctx.broker.definitions.bind_queue(who_session, dst, src, body.routing_key,
                               body.arguments)
    else:
        await ctx.broker.definitions.bind_exchange(who_session, dst, src, body.routing_key,
                                  body.arguments)
    key = properties_key(body.routing_key, body.arguments)
    return Response(status_code=201, headers={"Location": key})


def same_key(stored: str, props: str) -> bool:
    """Whether the path segment `props` names the binding whose key is `stored`.

    A properties key is percent-escaped (`a.%23~hash` for routing key `a.#`); the
    path segment arrives decoded but for `%` and `/`, so both sides are compared
    decoded.
    """
    return unquote(stored) == path_name(props)


def _find(ctx: ApiContext, vhost: str, source: str, kind: Kind, destination: str, props: str
          ) -> dict[str, Any]:
    _check_ends(ctx, vhost, source, kind, destination)
    for view in _between(ctx, vhost, source, kind, destination):
        if same_key(view["properties_key"], props):
            return view
    raise ApiError(404, f"no binding '{props}' from '{source}' to '{destination}'")


@router.get("/api/bindings/{vhost}/e/{source}/{kind}/{destination}/{props}")
async def get_binding(vhost: str, source: str, kind: Kind, destination: str, props: str,
                ctx: ApiContext = Context, who: Principal = Management) -> dict[str, Any]:
    vhost_name = path_name(vhost)
    visible_vhost(ctx, who, vhost_name)
    return _find(ctx, vhost_name, exchange_name(path_name(source)), kind,
                 path_name(destination), props)


@router.delete("/api/bindings/{vhost}/e/{source}/{kind}/{destination}/{props}",
               status_code=204)
async def delete_binding(vhost: str, source: str, kind: Kind, destination: str, props: str,
                   ctx: ApiContext = Context, who: Principal = Management) -> Response:
    vhost_name = path_name(vhost)
    who_session = session(ctx, who, vhost_name)
    src, dst = exchange_name(path_name(source)), path_name(destination)
    view = _find(ctx, vhost_name, src, kind, dst, props)
    if not src:
        raise ApiError(403, "default bindings cannot be deleted")
    if kind == "q":
        await ctx.broker.definitions.bind_queue(who_session, dst, src, view["routing_key"],
                               _arguments_of(ctx, vhost_name, src, kind, dst, props),
                               unbind=True)
    else:
        await ctx.broker.definitions.bind_exchange(who_session, dst, src, view["routing_key"],
                                  _arguments_of(ctx, vhost_name, src, kind, dst, props),
                                  unbind=True)
    return Response(status_code=204)


def _arguments_of(ctx: ApiContext, vhost: str, source: str, kind: Kind, destination: str,
                  props: str) -> dict[str, Any]:
    """The binding's stored arguments (the view's are made JSON-safe, these are exact)."""
    target = Destination("queue" if kind == "q" else "exchange", destination)
    for binding in ctx.broker.state.bindings_to(vhost, target):
        if binding.source == source and \
                same_key(properties_key(binding.routing_key, binding.arguments), props):
            return dict(binding.arguments)
    return {}
