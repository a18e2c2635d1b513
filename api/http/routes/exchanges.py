"""/api/exchanges: list, declare, delete, and RabbitMQ's publish."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Response
from pydantic import Field

from api.http.api_context import ApiContext, api_context
from api.http.auth import Principal, management_user, session, visible_vhost, visible_vhosts
from api.http.http_errors import ApiError
from api.http.http_publish import (
    build_message,
    check_not_blocked,
    exchange_name,
    publish_one,
)
from api.http.path_names import path_name
from api.http.query_params import ListOptions
from api.http.rate_details import RateQuery, Rates
from api.http.request_body import RequestBody
from api.http.views import exchange_stats, exchange_view
from logbroker.metadata import ExchangeRecord
from logbroker.queue_figures import cluster_figures

router = APIRouter(tags=["exchanges"])
Context = Depends(api_context)
Management = Depends(management_user)


class ExchangeBody(RequestBody):
    type: str = "direct"
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    arguments: dict[str, Any] = Field(default_factory=dict)


class PublishBody(RequestBody):
    routing_key: str = ""
    payload: str = ""
    payload_encoding: str = "string"
    properties: dict[str, Any] = Field(default_factory=dict)


def default_exchange(vhost: str) -> ExchangeRecord:
    """The default exchange (`amq.default` in a path): implicit, listed as RabbitMQ does."""
    return ExchangeRecord(vhost, "", "direct", durable=True, auto_delete=False, internal=False)


def _exchange(ctx: ApiContext, vhost: str, name: str) -> ExchangeRecord | None:
    if not name and ctx.broker.state.vhost(vhost) is not None:
        return default_exchange(vhost)
    return ctx.broker.state.exchange(vhost, name)


async def _views(ctx: ApiContext, records: list[ExchangeRecord], query: RateQuery
                 ) -> list[dict[str, Any]]:
    """The exchanges with what every node counted of them (cluster_figures)."""
    now_ms = ctx.broker.clock.wall_ms()
    keys = [(record.vhost, record.name) for record in records]
    figures = await cluster_figures(ctx.broker, [], query.grid(now_ms), exchanges=keys)
    views = []
    for record, key in zip(records, keys, strict=True):
        view = exchange_view(record, ctx.broker.state.effective_policy(
            record.vhost, "exchange", record.name))
        view["message_stats"] = exchange_stats(figures.exchanges[key], query, now_ms)
        views.append(view)
    return views


def _records(ctx: ApiContext, vhosts: list[str]) -> list[ExchangeRecord]:
    return [record for vhost in vhosts
            for record in (default_exchange(vhost), *ctx.broker.state.exchanges(vhost))]


@router.get("/api/exchanges", dependencies=[ListOptions])
async def list_exchanges(ctx: ApiContext = Context, who: Principal = Management,
                         query: RateQuery = Rates) -> list[dict[str, Any]]:
    return await _views(ctx, _records(ctx, visible_vhosts(ctx, who)), query)


@router.get("/api/exchanges/{vhost}", dependencies=[ListOptions])
async def list_vhost_exchanges(vhost: str, ctx: ApiContext = Context, who: Principal = Management,
                               query: RateQuery = Rates) -> list[dict[str, Any]]:
    visible_vhost(ctx, who, path_name(vhost))
    return await _views(ctx, _records(ctx, [path_name(vhost)]), query)


@router.get("/api/exchanges/{vhost}/{name}")
async def get_exchange(vhost: str, name: str, ctx: ApiContext = Context,
                       who: Principal = Management, query: RateQuery = Rates
                       ) -> dict[str, Any]:
    vhost_name, exchange = path_name(vhost), exchange_name(path_name(name))
    visible_vhost(ctx, who, vhost_name)
    record = _exchange(ctx, vhost_name, exchange)
    if record is None:
        raise ApiError(404, f"no exchange '{exchange}' in vhost '{vhost_name}'")
    [view] = await _views(ctx, [record], query)
    return view


@router.put("/api/exchanges/{vhost}/{name}", status_code=201, responses={204: {}})
async def put_exchange(vhost: str, name: str, body: ExchangeBody, ctx: ApiContext = Context,
                 who: Principal = Management) -> Response:
    vhost_name, exchange = path_name(vhost), exchange_name(path_name(name))
    who_session = session(ctx, who, vhost_name)
    if not exchange:
        raise ApiError(403, "the default exchange cannot be declared")
    existed = ctx.broker.state.exchange(vhost_name, exchange) is not None
    await ctx.broker.definitions.declare_exchange(who_session, exchange, body.type,
                                 durable=body.durable, auto_delete=body.auto_delete,
                                 internal=body.internal, arguments=body.arguments)
    return Response(status_code=204 if existed else 201)


@router.delete("/api/exchanges/{vhost}/{name}", status_code=204)
async def delete_exchange(vhost: str, name: str, ctx: ApiContext = Context,
                    who: Principal = Management,
                    if_unused: bool = Query(False, alias="if-unused")) -> Response:
    vhost_name, exchange = path_name(vhost), exchange_name(path_name(name))
    who_session = session(ctx, who, vhost_name)
    if not exchange or exchange.startswith("amq."):
        raise ApiError(403, f"exchange '{exchange or 'amq.default'}' cannot be deleted")
    if ctx.broker.state.exchange(vhost_name, exchange) is None:
        raise ApiError(404, f"no exchange '{exchange}' in vhost '{vhost_name}'")
    await ctx.broker.definitions.delete_exchange(who_session, exchange, if_unused)
    return Response(status_code=204)


@router.post("/api/exchanges/{vhost}/{name}/publish")
async def publish(vhost: str, name: str, body: PublishBody, ctx: ApiContext = Context,
                  who: Principal = Management) -> dict[str, Any]:
    """RabbitMQ's publish: answers once the message is confirmed (`routed` says if it went
    anywhere); a queue refusing it (x-overflow reject-publish) answers `confirmed: false`."""
    vhost_name, exchange = path_name(vhost), exchange_name(path_name(name))
    who_session = session(ctx, who, vhost_name)
    check_not_blocked(ctx.broker)
    message = build_message(ctx.broker, who_session, exchange, body.model_dump())
    outcome = await publish_one(ctx.broker, vhost_name, message)
    answer: dict[str, Any] = {"routed": outcome.routed, "confirmed": outcome.confirmed}
    if outcome.reason:
        answer["reason"] = outcome.reason
    return answer
