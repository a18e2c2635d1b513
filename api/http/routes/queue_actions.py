"""Replicated queues' leadership and synchronisation, as RabbitMQ's HTTP API shapes them.

- `POST /api/queues/{vhost}/{name}/actions` with `{"action": "sync"}` or
  `{"action": "cancel_sync"}` (RabbitMQ's), or `{"action": "transfer_leader",
  "node": "n2"}` (ours; `node` may be left out: the best in-sync follower).
  `sync` / `cancel_sync` answer 204; `transfer_leader` answers 200 with
  `{"leader": <the new leader>}`.
- `POST /api/rebalance/queues`: spread replicated queues' leaders evenly over the
  hosts, then over the workers of each host (`logbroker.leader_rebalance`), among
  the nodes that are up; 200 with `{"moves": [{"vhost", "name", "from", "to"}, ...]}`.

Administrators only. A standalone node has nothing to move: 400.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Response
from pydantic import Field

from api.http.api_context import ApiContext, api_context
from api.http.auth import Principal, admin_user
from api.http.http_errors import ApiError
from api.http.path_names import path_name
from api.http.request_body import RequestBody
from logbroker.cluster.cluster_control import ReplicaControl

router = APIRouter(tags=["queues"])
Context = Depends(api_context)
Admin = Depends(admin_user)
NOT_CLUSTERED = "this node is not clustered: its queues have no replicas"


class ActionBody(RequestBody):
    action: Literal["sync", "cancel_sync", "transfer_leader"]
    node: str | None = Field(default=None, min_length=1, max_length=255)


def _replicas(ctx: ApiContext) -> ReplicaControl:
    if ctx.replicas is None:
        raise ApiError(400, NOT_CLUSTERED)
    return ctx.replicas


@router.post("/api/queues/{vhost}/{name}/actions", response_model=None,
             responses={204: {}})
async def queue_action(vhost: str, name: str, body: ActionBody, ctx: ApiContext = Context,
                       _who: Principal = Admin) -> Response | dict[str, Any]:
    replicas = _replicas(ctx)
    vhost_name, queue = path_name(vhost), path_name(name)
    if body.action == "transfer_leader":
        return {"leader": await replicas.transfer(vhost_name, queue, body.node)}
    if body.action == "sync":
        await replicas.sync(vhost_name, queue)
    else:
        await replicas.cancel_sync(vhost_name, queue)
    return Response(status_code=204)


@router.post("/api/rebalance/queues")
async def rebalance_queues(ctx: ApiContext = Context, _who: Principal = Admin
                           ) -> dict[str, Any]:
    return {"moves": await _replicas(ctx).rebalance()}
