"""/api/cluster: the cluster's membership and liveness, and adding or removing a node.

`GET /api/cluster` is the node's `ClusterControl.status()` document (see
`logbroker.cluster.cluster_control`) plus `"clustered": true`. A standalone
node (started without `--peers` / `--join`) answers a one-node document
describing itself as the voter and leader, with `"clustered": false`, and
refuses membership changes with 400.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Response
from pydantic import Field

from api.http.api_context import ApiContext, api_context
from api.http.auth import Principal, admin_user, monitoring_user
from api.http.http_errors import ApiError
from api.http.path_names import path_name
from api.http.request_body import RequestBody
from logbroker.cluster.cluster_control import ClusterControl

router = APIRouter(tags=["cluster"])
Context = Depends(api_context)
Monitoring = Depends(monitoring_user)
Admin = Depends(admin_user)
NOT_CLUSTERED = "this node is not clustered (start it with --peers or --join)"


class NodeBody(RequestBody):
    name: str = Field(min_length=1, max_length=255)
    host: str = Field(min_length=1, max_length=255)
    cluster_port: int = Field(ge=1, le=65535)


def standalone_status(ctx: ApiContext) -> dict[str, Any]:
    """The status document of a node that is a cluster of one."""
    name = ctx.node_name
    queue_count = sum(len(ctx.broker.queues_of(vhost.name))
                      for vhost in ctx.broker.state.vhosts())
    return {
        "cluster_name": name, "node": name, "leader": name, "clustered": False,
        "term": 0, "commit_index": 0, "applied_index": 0,
        "nodes": [{
            "name": name, "host": ctx.listeners.host, "cluster_port": None,
            "amqp_port": ctx.listeners.amqp_port, "http_port": ctx.listeners.http_port,
            "role": "voter", "status": "up", "since_ms": ctx.started_at_ms,
            "connected": True, "queue_leaders": queue_count, "host_id": "", "zone": "",
        }],
        "hosts": [{"host_id": name, "zone": "", "workers": [name], "up": 1}],
    }


def cluster_status(ctx: ApiContext) -> dict[str, Any]:
    """The node's cluster status: the cluster's own document, or the one-node one."""
    if ctx.cluster is None:
        return standalone_status(ctx)
    return {**ctx.cluster.status(), "clustered": True}


def _clustered(ctx: ApiContext) -> ClusterControl:
    if ctx.cluster is None:
        raise ApiError(400, NOT_CLUSTERED)
    return ctx.cluster


@router.get("/api/cluster")
async def get_cluster(ctx: ApiContext = Context, _who: Principal = Monitoring
                      ) -> dict[str, Any]:
    return cluster_status(ctx)


@router.post("/api/cluster/nodes", status_code=201, responses={204: {}})
async def add_cluster_node(body: NodeBody, ctx: ApiContext = Context,
                           _who: Principal = Admin) -> Response:
    """Add a node (running with `--join`) as a member: 201, or 204 if it already is one."""
    cluster = _clustered(ctx)
    known = any(node.get("name") == body.name for node in cluster.status().get("nodes", ()))
    await cluster.add_node(body.name, body.host, body.cluster_port)
    return Response(status_code=204 if known else 201)


@router.delete("/api/cluster/nodes/{name}", status_code=204)
async def remove_cluster_node(name: str, ctx: ApiContext = Context,
                              _who: Principal = Admin) -> Response:
    """Remove a node from the membership and forget it (404 if unknown)."""
    await _clustered(ctx).remove_node(path_name(name))
    return Response(status_code=204)
