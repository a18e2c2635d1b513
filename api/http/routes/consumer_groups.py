"""/api/consumer-groups: durable, replicated read positions of queue readers (Kafka's
committed consumer-group offsets), with each queue's lag.

A group holds, per queue, the next offset its reader (a Spark query, say)
will read. `PUT` merges offsets into the group (queues not named keep
theirs; a lower offset is a reset); `GET` shows them with each queue's
retained range and end and the lag; `DELETE` forgets the group. Committing
and deleting need `read` permission on every queue involved; reading a
group or a listing needs access to the vhost (no management tag: the paths
serve readers, as replay does). Any node answers: the offsets are in the
metadata, and each queue's range comes from this node or its leader
(`logbroker.queue_figures.queue_range`; null when not known).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, Field, StrictInt

from api.http.api_context import ApiContext, api_context
from api.http.auth import Principal, principal, session, visible_vhost, visible_vhosts
from api.http.http_errors import ApiError
from api.http.path_names import path_name
from logbroker import consumer_groups
from logbroker.metadata import ConsumerGroupRecord
from logbroker.metadata.group_commands import (
    MAX_GROUP_NAME_BYTES,
    MAX_OFFSET,
    MAX_QUEUES_PER_GROUP,
)

router = APIRouter(tags=["consumer groups"])
Context = Depends(api_context)
Authenticated = Depends(principal)
Offset = Annotated[StrictInt, Field(ge=0, le=MAX_OFFSET)]


class CommitBody(BaseModel):
    offsets: dict[str, Offset] = Field(
        description="queue name -> the next offset the group will read (an integer >= 0)")


def _group_name(raw: str) -> str:
    name = path_name(raw)
    if not 1 <= len(name.encode()) <= MAX_GROUP_NAME_BYTES:
        raise ApiError(400, f"a consumer group name must be 1 to {MAX_GROUP_NAME_BYTES} bytes",
                       "group")
    return name


async def group_view(ctx: ApiContext, record: ConsumerGroupRecord) -> dict[str, Any]:
    positions = await consumer_groups.positions(ctx.broker, record)
    return {
        "vhost": record.vhost, "name": record.name,
        "queues": [{"queue": p.queue, "committed_offset": p.committed_offset,
                    "first_offset": p.first_offset, "end_offset": p.end_offset, "lag": p.lag}
                   for p in positions],
        "lag": sum(p.lag for p in positions if p.lag is not None),
    }


async def _views(ctx: ApiContext, vhosts: list[str]) -> list[dict[str, Any]]:
    return [await group_view(ctx, record)
            for vhost in vhosts for record in ctx.broker.state.consumer_groups(vhost)]


@router.get("/api/consumer-groups")
async def list_groups(ctx: ApiContext = Context, who: Principal = Authenticated
                      ) -> list[dict[str, Any]]:
    return await _views(ctx, visible_vhosts(ctx, who))


@router.get("/api/consumer-groups/{vhost}")
async def list_vhost_groups(vhost: str, ctx: ApiContext = Context,
                            who: Principal = Authenticated) -> list[dict[str, Any]]:
    visible_vhost(ctx, who, path_name(vhost))
    return await _views(ctx, [path_name(vhost)])


@router.get("/api/consumer-groups/{vhost}/{group}")
async def get_group(vhost: str, group: str, ctx: ApiContext = Context,
                    who: Principal = Authenticated) -> dict[str, Any]:
    vhost_name, name = path_name(vhost), _group_name(group)
    visible_vhost(ctx, who, vhost_name)
    return await group_view(ctx, consumer_groups.existing_group(ctx.broker, vhost_name, name))


@router.put("/api/consumer-groups/{vhost}/{group}", status_code=204)
async def commit_offsets(vhost: str, group: str, body: CommitBody, ctx: ApiContext = Context,
                         who: Principal = Authenticated) -> Response:
    vhost_name, name = path_name(vhost), _group_name(group)
    who_session = session(ctx, who, vhost_name)
    if len(body.offsets) > MAX_QUEUES_PER_GROUP:
        raise ApiError(400, f"at most {MAX_QUEUES_PER_GROUP} queues per commit", "offsets")
    await consumer_groups.commit_offsets(ctx.broker, who_session, name, body.offsets)
    return Response(status_code=204)


@router.delete("/api/consumer-groups/{vhost}/{group}", status_code=204)
async def delete_group(vhost: str, group: str, ctx: ApiContext = Context,
                       who: Principal = Authenticated) -> Response:
    vhost_name, name = path_name(vhost), _group_name(group)
    await consumer_groups.delete_group(ctx.broker, session(ctx, who, vhost_name), name)
    return Response(status_code=204)
