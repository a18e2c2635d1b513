"""/api/queues: list, declare, delete, purge, and RabbitMQ's get."""

from __future__ import annotations

import itertools
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Response
from pydantic import Field

from api.http.api_context import ApiContext, api_context
from api.http.auth import Principal, management_user, session, visible_vhost, visible_vhosts
from api.http.http_errors import ApiError
from api.http.message_codec import message_json
from api.http.path_names import path_name
from api.http.query_params import ListOptions
from api.http.rate_details import RateQuery, Rates
from api.http.request_body import RequestBody
from api.http.views import queue_view
from logbroker.metadata import QueueRecord
from logbroker.queue_figures import cluster_figures

router = APIRouter(tags=["queues"])
Context = Depends(api_context)
Management = Depends(management_user)
_get_serial = itertools.count(1)
MAX_GET_COUNT = 10_000


class QueueBody(RequestBody):
    durable: bool = True
    auto_delete: bool = False
    arguments: dict[str, Any] = Field(default_factory=dict)
    node: str | None = None


class GetBody(RequestBody):
    count: int = Field(1, ge=1, le=MAX_GET_COUNT)
    ackmode: Literal["ack_requeue_true", "ack_requeue_false", "reject_requeue_true",
                     "reject_requeue_false"] = "ack_requeue_true"
    encoding: Literal["auto", "base64"] = "auto"
    truncate: int | None = Field(None, ge=0)


async def queue_views(ctx: ApiContext, vhosts: list[str], query: RateQuery
                      ) -> list[dict[str, Any]]:
    """Every queue's view with cluster-wide figures, asked of their leaders at once."""
    state = ctx.broker.state
    return await queue_views_of(ctx, [record for vhost in vhosts
                                      for record in state.queues(vhost)], query)


async def queue_views_of(ctx: ApiContext, records: list[QueueRecord], query: RateQuery
                         ) -> list[dict[str, Any]]:
    state, broker = ctx.broker.state, ctx.broker
    now_ms = broker.clock.wall_ms()
    figures = await cluster_figures(broker, [(r.vhost, r.name) for r in records],
                                    query.grid(now_ms))
    return [queue_view(ctx, record, broker.queue(record.vhost, record.name),
                       state.effective_policy(record.vhost, "queue", record.name),
                       figures.queues[(record.vhost, record.name)], query, now_ms)
            for record in records]


@router.get("/api/queues", dependencies=[ListOptions])
async def list_queues(ctx: ApiContext = Context, who: Principal = Management,
                      query: RateQuery = Rates) -> list[dict[str, Any]]:
    return await queue_views(ctx, visible_vhosts(ctx, who), query)


@router.get("/api/queues/{vhost}", dependencies=[ListOptions])
async def list_vhost_queues(vhost: str, ctx: ApiContext = Context, who: Principal = Management,
                            query: RateQuery = Rates) -> list[dict[str, Any]]:
    visible_vhost(ctx, who, path_name(vhost))
    return await queue_views(ctx, [path_name(vhost)], query)


@router.get("/api/queues/{vhost}/{name}")
async def get_queue(vhost: str, name: str, ctx: ApiContext = Context, who: Principal = Management,
                    query: RateQuery = Rates) -> dict[str, Any]:
    vhost_name, queue = path_name(vhost), path_name(name)
    visible_vhost(ctx, who, vhost_name)
    record = ctx.broker.state.queue(vhost_name, queue)
    if record is None:
        raise ApiError(404, f"no queue '{queue}' in vhost '{vhost_name}'")
    [view] = await queue_views_of(ctx, [record], query)
    return view


@router.put("/api/queues/{vhost}/{name}", status_code=201, responses={204: {}})
async def put_queue(vhost: str, name: str, body: QueueBody, ctx: ApiContext = Context,
              who: Principal = Management) -> Response:
    vhost_name, queue = path_name(vhost), path_name(name)
    who_session = session(ctx, who, vhost_name)
    if not queue or len(queue.encode()) > 255:
        raise ApiError(400, "a queue name must be 1 to 255 bytes", "name")
    if queue.startswith("amq."):
        raise ApiError(403, f"queue name '{queue}' contains reserved prefix 'amq.*'")
    existed = ctx.broker.state.queue(vhost_name, queue) is not None
    await ctx.broker.definitions.declare_queue(who_session, queue, durable=body.durable,
                              auto_delete=body.auto_delete, arguments=body.arguments)
    return Response(status_code=204 if existed else 201)


@router.delete("/api/queues/{vhost}/{name}", status_code=204)
async def delete_queue(vhost: str, name: str, ctx: ApiContext = Context,
                 who: Principal = Management,
                 if_unused: bool = Query(False, alias="if-unused"),
                 if_empty: bool = Query(False, alias="if-empty")) -> Response:
    vhost_name, queue = path_name(vhost), path_name(name)
    who_session = session(ctx, who, vhost_name)
    await ctx.broker.definitions.delete_queue(who_session, queue, if_unused=if_unused,
                             if_empty=if_empty)
    return Response(status_code=204)


@router.delete("/api/queues/{vhost}/{name}/contents", status_code=204)
async def purge_queue(vhost: str, name: str, ctx: ApiContext = Context,
                who: Principal = Management) -> Response:
    vhost_name, queue = path_name(vhost), path_name(name)
    await ctx.broker.definitions.purge_queue(session(ctx, who, vhost_name), queue)
    return Response(status_code=204)


@router.post("/api/queues/{vhost}/{name}/get")
async def get_messages(vhost: str, name: str, body: GetBody, ctx: ApiContext = Context,
                 who: Principal = Management) -> list[dict[str, Any]]:
    """RabbitMQ's get: take up to `count` messages, then settle them all by `ackmode`
    (requeued ones come back with redelivered=true, as RabbitMQ does)."""
    vhost_name, queue = path_name(vhost), path_name(name)
    who_session = session(ctx, who, vhost_name)
    channel_key = f"http-get:{next(_get_serial)}"
    no_ack = body.ackmode == "ack_requeue_false"
    taken: list[int] = []
    out: list[dict[str, Any]] = []
    endpoint = None
    for _ in range(body.count):
        found = await ctx.broker.consuming.get(who_session, queue, channel_key, no_ack)
        if found is None:
            break
        offset, redelivered, message, left, endpoint = found
        taken.append(offset)
        view = message_json(message, body.encoding, body.truncate)
        view.update({"redelivered": redelivered, "message_count": left})
        out.append(view)
    if endpoint is not None and taken and not no_ack:
        requeue = body.ackmode in ("ack_requeue_true", "reject_requeue_true")
        endpoint.reject(taken, requeue=requeue)
    return out
