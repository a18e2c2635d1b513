"""Transactional batch publish over HTTP: stage parts of a batch, then commit or abort it.

The guarantee and its limits are `logbroker.producer_batches`'; the contract is
in docs/http-api.md. Staging checks every message as a publish does (the
exchange exists, the user may write to it, properties and payload are valid),
so a commit publishes only messages that were accepted.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Path
from pydantic import Field

from api.http.api_context import ApiContext, api_context
from api.http.auth import Principal, principal, session
from api.http.http_errors import ApiError, at_node
from api.http.http_publish import build_message, check_not_blocked, exchange_name
from api.http.path_names import path_name
from api.http.request_body import RequestBody
from logbroker.batch_staging import NotLeader, StagingRefused
from logbroker.metadata.producer_commands import MAX_PRODUCER_NAME_BYTES
from logbroker.producer_batches import BatchConflict
from logbroker.staging_queues import UnknownParts

router = APIRouter(tags=["transactional batch publish"])
Context = Depends(api_context)
Authenticated = Depends(principal)
MAX_PART_MESSAGES = 10_000
MAX_PARTS = 100_000
Seq = Path(..., ge=0, lt=2**63, description="the batch's sequence number")


class PartBody(RequestBody):
    exchange: str = ""
    messages: list[dict[str, Any]] = Field(..., min_length=1, max_length=MAX_PART_MESSAGES)


class CommitBody(RequestBody):
    parts: list[str] = Field(..., max_length=MAX_PARTS)


def producer_name(raw: str) -> str:
    name = path_name(raw)
    if not 0 < len(name.encode()) <= MAX_PRODUCER_NAME_BYTES:
        raise ApiError(400, f"a producer id is 1 to {MAX_PRODUCER_NAME_BYTES} bytes", "producer")
    return name


def leader_elsewhere(ctx: ApiContext, node: str | None, what: str) -> ApiError:
    """421 naming the node that leads the batch's staging queue, as a replay does."""
    record = ctx.broker.state.cluster_node(node) if node is not None else None
    if record is None:
        return ApiError(503, f"{what}: the node that holds its staged parts is not known now; "
                             "retry shortly")
    return at_node(record.host, record.http_port,
                   f"{what} is staged on node '{node}': commit it")


@router.post("/api/producers/{vhost}/{producer}/batches/{seq}/parts", status_code=201)
async def stage_part(vhost: str, producer: str, body: PartBody, seq: int = Seq,
                     ctx: ApiContext = Context, who: Principal = Authenticated
                     ) -> dict[str, Any]:
    """Stage one part of batch `seq`: checked like a publish, held until commit or abort."""
    vhost_name, name = path_name(vhost), producer_name(producer)
    who_session = session(ctx, who, vhost_name)
    check_not_blocked(ctx.broker)
    exchange = exchange_name(body.exchange)
    checked: set[str] = set()
    messages = [build_message(ctx.broker, who_session, exchange, item, index, checked)
                for index, item in enumerate(body.messages)]
    try:
        token = await ctx.broker.producer_batches.stage(vhost_name, name, seq, messages)
    except BatchConflict as error:
        raise ApiError(409, str(error)) from error
    except StagingRefused as error:
        raise ApiError(413 if error.too_large else 503, error.text) from error
    return {"part": token, "messages": len(messages),
            "bytes": sum(len(message.body) for message in messages)}


@router.post("/api/producers/{vhost}/{producer}/batches/{seq}/commit")
async def commit_batch(vhost: str, producer: str, body: CommitBody, seq: int = Seq,
                       ctx: ApiContext = Context, who: Principal = Authenticated
                       ) -> dict[str, Any]:
    """Publish the listed parts of batch `seq` as one, once; discard its other parts."""
    vhost_name, name = path_name(vhost), producer_name(producer)
    session(ctx, who, vhost_name)
    try:
        outcome = await ctx.broker.producer_batches.commit(vhost_name, name, seq, body.parts)
    except BatchConflict as error:
        raise ApiError(409, str(error)) from error
    except NotLeader as error:
        raise leader_elsewhere(ctx, error.node, f"batch {seq} of producer '{name}'") from error
    except UnknownParts as error:
        raise ApiError(409, f"batch {seq} of producer '{name}' has no staged part "
                            f"{', '.join(error.tokens)} (expired, aborted or never staged): "
                            "stage the batch again", "parts") from error
    return {"producer": name, "seq": seq, "committed": True, "duplicate": outcome.duplicate,
            "messages": outcome.messages, "unroutable": outcome.unroutable,
            "refused": outcome.refused}


@router.post("/api/producers/{vhost}/{producer}/batches/{seq}/abort")
async def abort_batch(vhost: str, producer: str, seq: int = Seq, ctx: ApiContext = Context,
                      who: Principal = Authenticated) -> dict[str, Any]:
    vhost_name, name = path_name(vhost), producer_name(producer)
    session(ctx, who, vhost_name)
    try:
        discarded = await ctx.broker.producer_batches.abort(vhost_name, name, seq)
    except BatchConflict as error:
        raise ApiError(409, str(error)) from error
    return {"producer": name, "seq": seq, "aborted": True, "discarded_parts": discarded}


@router.get("/api/producers/{vhost}/{producer}")
async def producer_view(vhost: str, producer: str, ctx: ApiContext = Context,
                        who: Principal = Authenticated) -> dict[str, Any]:
    vhost_name, name = path_name(vhost), producer_name(producer)
    session(ctx, who, vhost_name)
    record = ctx.broker.state.producer(vhost_name, name)
    batches = ctx.broker.producer_batches.open_batches(vhost_name, name)
    if record is None and not batches:
        raise ApiError(404, f"no producer '{name}' in vhost '{vhost_name}'")
    return {
        "vhost": vhost_name, "producer": name,
        "last_committed_seq": record.last_committed_seq if record is not None else None,
        "committed_seqs": list(record.committed) if record is not None else [],
        "pending_seqs": [seq for seq, _ in record.pending] if record is not None else [],
        "open_batches": [{"seq": b.seq, "messages": b.messages, "bytes": b.size_bytes}
                         for b in batches],
    }
