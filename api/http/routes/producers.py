"""Transactional batch publish over HTTP: stage parts of a batch, then commit or abort it.

The guarantee and its limits are `logbroker.producer_batches`'; the contract is
in docs/http-api.md. Staging checks every message as a publish does (the
exchange exists, the user may write to it, properties and payload are valid),
so a commit publishes only messages that were accepted.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel, Field

from api.http.api_context import ApiContext, api_context
from api.http.auth import Principal, principal, session
from api.http.http_errors import ApiError
from api.http.http_publish import build_message, check_not_blocked, exchange_name
from api.http.path_names import path_name
from logbroker.metadata.producer_commands import MAX_PRODUCER_NAME_BYTES
from logbroker.producer_batches import BatchConflict
from logbroker.staged_parts import StagingLimit, UnknownParts

router = APIRouter(tags=["transactional batch publish"])
Context = Depends(api_context)
Authenticated = Depends(principal)
MAX_PART_MESSAGES = 10_000
MAX_PARTS = 100_000
Seq = Path(..., ge=0, lt=2**63, description="the batch's sequence number")


class PartBody(BaseModel):
    exchange: str = ""
    messages: list[dict[str, Any]] = Field(..., min_length=1, max_length=MAX_PART_MESSAGES)


class CommitBody(BaseModel):
    parts: list[str] = Field(..., max_length=MAX_PARTS)


def producer_name(raw: str) -> str:
    name = path_name(raw)
    if not 0 < len(name.encode()) <= MAX_PRODUCER_NAME_BYTES:
        raise ApiError(400, f"a producer id is 1 to {MAX_PRODUCER_NAME_BYTES} bytes", "producer")
    return name


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
        token = ctx.broker.producer_batches.stage(vhost_name, name, seq, messages)
    except BatchConflict as error:
        raise ApiError(409, str(error)) from error
    except StagingLimit as error:
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
    except UnknownParts as error:
        raise ApiError(409, f"batch {seq} of producer '{name}' has no staged part "
                            f"{', '.join(error.tokens)} (expired, aborted, never staged, or "
                            "lost in a broker restart): stage the batch again", "parts"
                       ) from error
    return {"producer": name, "seq": seq, "committed": True, "duplicate": outcome.duplicate,
            "messages": outcome.messages, "unroutable": outcome.unroutable,
            "refused": outcome.refused}


@router.post("/api/producers/{vhost}/{producer}/batches/{seq}/abort")
async def abort_batch(vhost: str, producer: str, seq: int = Seq, ctx: ApiContext = Context,
                      who: Principal = Authenticated) -> dict[str, Any]:
    vhost_name, name = path_name(vhost), producer_name(producer)
    session(ctx, who, vhost_name)
    try:
        discarded = ctx.broker.producer_batches.abort(vhost_name, name, seq)
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
        "open_batches": [{"seq": b.seq, "parts": b.parts, "messages": b.messages,
                          "bytes": b.size_bytes, "expires_at_ms": b.expires_at_ms}
                         for b in batches],
    }
