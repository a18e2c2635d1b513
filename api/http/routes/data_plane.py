"""Data-plane paths beyond RabbitMQ's: batch publish, and consume with acknowledgement.

Batch publish takes many messages in one request and answers one result per
message, in order, once each is confirmed or nacked. A lease is a get that
wants an ack: the messages stay unacked for `visibility_timeout_ms`; the
client acks, nacks or rejects them by delivery tag, and an expired lease puts
its message back in the queue, redelivered (see `api.http.leases`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import Field

from api.http.api_context import ApiContext, api_context
from api.http.auth import Principal, principal, session
from api.http.http_errors import ApiError
from api.http.http_publish import build_message, check_not_blocked, exchange_name, publish_many
from api.http.leases import Lease
from api.http.message_codec import message_json
from api.http.path_names import path_name
from api.http.request_body import RequestBody

router = APIRouter(tags=["data plane"])
Context = Depends(api_context)
Authenticated = Depends(principal)
LEASE_CHANNEL = "http-lease"
MAX_BATCH = 10_000
MAX_VISIBILITY_MS = 12 * 3600 * 1000


class BatchMessage(RequestBody):
    routing_key: str = ""
    payload: str = ""
    payload_encoding: str = "string"
    properties: dict[str, Any] = Field(default_factory=dict)


class BatchBody(RequestBody):
    messages: list[BatchMessage] = Field(..., max_length=MAX_BATCH)


class LeaseBody(RequestBody):
    count: int = Field(1, ge=1, le=MAX_BATCH)
    visibility_timeout_ms: int = Field(30_000, ge=1, le=MAX_VISIBILITY_MS)
    encoding: str = Field("auto", pattern="^(auto|base64)$")


class SettleBody(RequestBody):
    delivery_tags: list[int] = Field(..., max_length=MAX_BATCH)
    requeue: bool = True


@router.post("/api/exchanges/{vhost}/{name}/publish-batch")
async def publish_batch(vhost: str, name: str, body: BatchBody, ctx: ApiContext = Context,
                        who: Principal = Authenticated) -> dict[str, Any]:
    """Publish every message in order; `results[i]` is the i-th message's confirm or nack."""
    vhost_name, exchange = path_name(vhost), exchange_name(path_name(name))
    who_session = session(ctx, who, vhost_name)
    check_not_blocked(ctx.broker)
    checked: set[str] = set()  # the exchange's checks run once for the request
    messages = [build_message(ctx.broker, who_session, exchange, item.model_dump(),
                              f"messages.{index}", checked)
                for index, item in enumerate(body.messages)]
    outcomes = await publish_many(ctx.broker, vhost_name, messages)
    return {"results": [
        {"routed": o.routed, "confirmed": o.confirmed, **({"reason": o.reason} if o.reason else {})}
        for o in outcomes]}


@router.post("/api/queues/{vhost}/{name}/lease")
async def lease_messages(vhost: str, name: str, body: LeaseBody, ctx: ApiContext = Context,
                   who: Principal = Authenticated) -> dict[str, Any]:
    vhost_name, queue = path_name(vhost), path_name(name)
    who_session = session(ctx, who, vhost_name)
    if not ctx.leases.has_room(body.count):
        raise ApiError(503, "too many leases outstanding on this node; ack some first")
    deadline = ctx.clock.wall_ms() + body.visibility_timeout_ms
    out = []
    for _ in range(body.count):
        found = await ctx.broker.consuming.get(who_session, queue, LEASE_CHANNEL,
                                    no_ack=False)
        if found is None:
            break
        offset, redelivered, message, left, endpoint = found
        lease = ctx.leases.grant(endpoint, vhost_name, queue, offset, who.user, deadline)
        view = message_json(message, body.encoding)
        view.update({"delivery_tag": lease.tag, "offset": offset, "redelivered": redelivered,
                     "message_count": left, "lease_expires_at": deadline})
        out.append(view)
    return {"messages": out}


def _settle(ctx: ApiContext, who: Principal, vhost: str, name: str, tags: list[int]
            ) -> tuple[list[Lease], list[int]]:
    vhost_name, queue = path_name(vhost), path_name(name)
    session(ctx, who, vhost_name)
    return ctx.leases.settle(tags, who.user, vhost_name, queue)


def _answer(settled: list[Lease], unknown: list[int]) -> dict[str, Any]:
    return {"settled": [lease.tag for lease in settled], "unknown": unknown}


@router.post("/api/queues/{vhost}/{name}/ack")
async def ack(vhost: str, name: str, body: SettleBody, ctx: ApiContext = Context,
        who: Principal = Authenticated) -> dict[str, Any]:
    """Ack leased messages. Tags whose lease expired (or never existed) come back as
    `unknown`: their messages were, or will be, redelivered."""
    settled, unknown = _settle(ctx, who, vhost, name, body.delivery_tags)
    for target, offsets in _by_target(settled):
        target.ack(offsets)
    return _answer(settled, unknown)


@router.post("/api/queues/{vhost}/{name}/nack")
async def nack(vhost: str, name: str, body: SettleBody, ctx: ApiContext = Context,
         who: Principal = Authenticated) -> dict[str, Any]:
    settled, unknown = _settle(ctx, who, vhost, name, body.delivery_tags)
    for target, offsets in _by_target(settled):
        target.reject(offsets, requeue=body.requeue)
    return _answer(settled, unknown)


@router.post("/api/queues/{vhost}/{name}/reject")
async def reject(vhost: str, name: str, body: SettleBody, ctx: ApiContext = Context,
           who: Principal = Authenticated) -> dict[str, Any]:
    return await nack(vhost, name, body, ctx, who)


def _by_target(leases: list[Lease]) -> list[tuple[Any, list[int]]]:
    groups: dict[int, tuple[Any, list[int]]] = {}
    for lease in leases:
        if lease.target is None or lease.target.closed:
            continue  # the queue was deleted: nothing left to settle
        groups.setdefault(id(lease.target), (lease.target, []))[1].append(lease.offset)
    return list(groups.values())


def expire_leases(ctx: ApiContext, now_ms: int) -> None:
    """Put the messages of expired leases back (redelivered=true)."""
    for target, offsets in _by_target(ctx.leases.expire(now_ms)):
        target.reject(offsets, requeue=True)
