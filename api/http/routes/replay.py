"""Replay: read a queue's log from an offset or a timestamp, non-destructively, in pages.

Like a Kafka fetch or a RabbitMQ stream consumer: the queue's consumers, acks
and counts are untouched, and settled (acked) messages read back as long as
the queue's retention keeps their segments. A page answers `next_offset`,
where the next page starts (never past `end_offset`); `end_offset` is where
the log ends now, as the node serving the page knows it.

Any node that holds the queue's leader or an in-sync follower copy serves
the replay (`Broker.replay_view`, Kafka's fetch from follower): a follower
up to the high watermark it heard, so no record is ever served before the
in-sync set holds it. Any other node answers 421 with the leader's URL in
`X-Queue-Leader-Url`. WebSocket replays (`ws_replay`) follow the queue's new
records as they are appended, which only the leader sees: they stay on the
leader (`replay_shell`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse, Response

from api.http.api_context import ApiContext, api_context
from api.http.auth import Principal, principal, session
from api.http.http_errors import ApiError, at_node
from api.http.message_codec import RecordEncoder
from api.http.path_names import path_name
from logbroker.queue.queue_shell import QueueShell
from logbroker.queue.replay_view import ReplayView

router = APIRouter(tags=["replay"])
Context = Depends(api_context)
Authenticated = Depends(principal)
MAX_PAGE_BYTES = 16 << 20
MAX_PAGE_MESSAGES = 100_000


def _elsewhere(ctx: ApiContext, vhost: str, queue: str) -> ApiError:
    """421 naming the queue's leader node and its URL, or 404 for an unknown queue."""
    record = ctx.broker.state.queue(vhost, queue)
    leader = record.leader_node if record is not None else None
    node = ctx.broker.state.cluster_node(leader) if leader is not None else None
    if node is not None:
        return at_node(node.host, node.http_port, f"queue '{queue}' in vhost '{vhost}' is "
                       f"led by node '{leader}': replay it")
    return ApiError(404, f"no queue '{queue}' in vhost '{vhost}'")


def _check_read(ctx: ApiContext, who: Principal, vhost: str, queue: str) -> None:
    ctx.broker.access.check(session(ctx, who, vhost), "queue", queue, "read")


def replay_view(ctx: ApiContext, who: Principal, vhost: str, queue: str) -> ReplayView:
    """The queue's log here: its leader's shell or an in-sync follower's copy."""
    _check_read(ctx, who, vhost, queue)
    view = ctx.broker.replay_view(vhost, queue)
    if view is None:
        raise _elsewhere(ctx, vhost, queue)
    return view


def replay_shell(ctx: ApiContext, who: Principal, vhost: str, queue: str) -> QueueShell:
    """The queue's shell, for a replay that follows new records (leader only)."""
    _check_read(ctx, who, vhost, queue)
    shell = ctx.broker.queue(vhost, queue)
    if shell is None:
        raise _elsewhere(ctx, vhost, queue)
    return shell


def start_offset(view: ReplayView, from_offset: int | None, from_timestamp: int | None) -> int:
    """Where the page starts: in [log start, readable end], so an offset past the end
    answers `next_offset == end_offset` (an empty page), never a position beyond it."""
    if from_offset is not None and from_timestamp is not None:
        raise ApiError(400, "give from_offset or from_timestamp, not both", "from_timestamp")
    if from_timestamp is not None:
        found = view.offset_for_timestamp(from_timestamp)
    else:
        found = max(from_offset or 0, view.log_start_offset)
    return min(found, max(view.readable_end, view.log_start_offset))


def read_page(view: ReplayView, offset: int, to_offset: int | None, max_messages: int,
              max_bytes: int, encoding: str) -> tuple[list[dict[str, Any]], int]:
    """Up to `max_messages` / about `max_bytes` of records from `offset`: (records, next)."""
    end = view.readable_end if to_offset is None else min(to_offset, view.readable_end)
    out: list[dict[str, Any]] = []
    to_json = RecordEncoder(encoding)
    size = 0
    while offset < end and len(out) < max_messages and size < max_bytes:
        records = view.read_log(offset, max_bytes - size)
        if not records:
            break
        for record in records:
            if record.offset >= end or len(out) >= max_messages:
                break
            out.append(to_json(record))
            size += len(record.value)
            offset = record.offset + 1
        else:
            continue
        break
    return out, offset


@router.get("/api/queues/{vhost}/{name}/messages", responses={200: {"content": {
    "application/json": {}, "application/vnd.logbroker.record-batches": {}}}})
async def replay(vhost: str, name: str, ctx: ApiContext = Context, who: Principal = Authenticated,
           from_offset: int | None = Query(None, ge=0, lt=2**63),
           from_timestamp: int | None = Query(None, ge=0, lt=2**63,
                                              description="milliseconds since the epoch"),
           to_offset: int | None = Query(None, ge=0, lt=2**63, description="exclusive"),
           max_messages: int = Query(1000, ge=1, le=MAX_PAGE_MESSAGES),
           max_bytes: int = Query(1 << 20, ge=1, le=MAX_PAGE_BYTES),
           encoding: str = Query("auto", pattern="^(auto|base64)$"),
           format: str = Query("json", pattern="^(json|batches)$",
                               description="batches: the log's record batches, binary")
           ) -> Response:
    view = replay_view(ctx, who, path_name(vhost), path_name(name))
    offset = start_offset(view, from_offset, from_timestamp)
    if format == "batches":
        return batches_page(view, offset, to_offset, max_bytes)
    messages, next_offset = read_page(view, offset, to_offset, max_messages, max_bytes,
                                      encoding)
    return JSONResponse({"messages": messages, "next_offset": next_offset,
                         "first_offset": view.log_start_offset,
                         "end_offset": view.readable_end})


BATCHES_MEDIA_TYPE = "application/vnd.logbroker.record-batches"


def batches_page(view: ReplayView, offset: int, to_offset: int | None, max_bytes: int
                 ) -> Response:
    """The stored record batches holding [offset, end), as they are on disk (CRC included).

    The fastest way to read a log: no per-record work on the broker. The first
    batch may start before `offset` and the last run past the end; the client
    keeps the records in [X-From-Offset, X-Next-Offset).
    """
    end = view.readable_end if to_offset is None else min(to_offset, view.readable_end)
    chunks: list[bytes] = []
    next_offset = offset
    if offset < end:
        for batch in view.read_batches(offset, max_bytes):
            if batch.next_offset > view.readable_end:
                break  # not all of it is readable yet
            chunks.append(batch.data)
            next_offset = min(batch.next_offset, end)
            if next_offset >= end:
                break
    return Response(b"".join(chunks), media_type=BATCHES_MEDIA_TYPE, headers={
        "X-From-Offset": str(offset), "X-Next-Offset": str(next_offset),
        "X-First-Offset": str(view.log_start_offset),
        "X-End-Offset": str(view.readable_end)})
