"""/api/cluster and the cluster view of /api/nodes, with a fake `ClusterControl`.

The app runs on a real (single-node) broker in a temporary directory, called
through httpx's ASGI transport from 127.0.0.1 (guest may log in from loopback only).
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.http.api_context import ApiContext, Listeners
from api.http.app import create_app
from logbroker.broker import Broker
from logbroker.broker_config import BrokerConfig
from logbroker.errors import BrokerError

NODE = "n1"
SINCE = 1_700_000_000_000


def member(name: str, status: str = "up", role: str = "voter", port: int = 1,
           queue_leaders: int = 0) -> dict[str, Any]:
    return {"name": name, "host": f"{name}.example", "cluster_port": 25672,
            "amqp_port": 5671 + port, "http_port": 15671 + port, "role": role,
            "status": status, "since_ms": SINCE + port, "connected": status == "up",
            "queue_leaders": queue_leaders}


@dataclass
class FakeCluster:
    """A ClusterControl whose status is a fixed document and whose changes are recorded."""

    document: dict[str, Any] = field(default_factory=lambda: {
        "cluster_name": "lab", "node": NODE, "leader": "n2", "term": 7, "commit_index": 42,
        "applied_index": 41,
        "nodes": [member("n1", queue_leaders=3), member("n2", port=2),
                  member("n3", status="down", port=3)],
    })
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    error: BrokerError | None = None

    @property
    def node_name(self) -> str:
        return NODE

    def status(self) -> dict[str, Any]:
        return copy.deepcopy(self.document)

    async def add_node(self, name: str, host: str, cluster_port: int) -> None:
        self.calls.append(("add", name, host, cluster_port))
        if self.error is not None:
            raise self.error

    async def remove_node(self, name: str) -> None:
        self.calls.append(("remove", name))
        if self.error is not None:
            raise self.error


@dataclass
class Api:
    context: ApiContext
    http: httpx.AsyncClient
    monitor: httpx.AsyncClient

    def cluster(self) -> FakeCluster:
        fake = FakeCluster()
        self.context.cluster = fake
        return fake


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    broker = Broker.open(BrokerConfig(data_dir=str(tmp_path), node_name=NODE))
    context = ApiContext(broker, Listeners(5672, 15672, "127.0.0.1"))
    transport = httpx.ASGITransport(app=create_app(context))
    async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                 auth=("guest", "guest")) as http, \
            httpx.AsyncClient(transport=transport, base_url="http://test",
                              auth=("mon", "pw")) as monitor:
        answer = await http.put("/api/users/mon", json={"password": "pw", "tags": "monitoring"})
        assert answer.status_code in (201, 204), answer.text
        yield Api(context, http, monitor)
    await broker.close()


# ---------------------------------------------------------------------- standalone


async def test_a_standalone_node_is_a_cluster_of_one(api: Api) -> None:
    await api.http.put("/api/queues/%2F/q1", json={})
    answer = await api.http.get("/api/cluster")
    assert answer.status_code == 200
    status = answer.json()
    assert status["clustered"] is False
    assert status["node"] == status["leader"] == status["cluster_name"] == NODE
    [node] = status["nodes"]
    assert node["name"] == NODE and node["role"] == "voter" and node["status"] == "up"
    assert node["connected"] is True and node["queue_leaders"] == 1
    assert (node["amqp_port"], node["http_port"]) == (5672, 15672)
    assert node["since_ms"] == api.context.started_at_ms


@pytest.mark.parametrize("method, path, body", [
    ("POST", "/api/cluster/nodes", {"name": "n4", "host": "h", "cluster_port": 25672}),
    ("DELETE", "/api/cluster/nodes/n4", None),
])
async def test_a_standalone_node_refuses_membership_changes(
        api: Api, method: str, path: str, body: dict[str, Any] | None) -> None:
    answer = await api.http.request(method, path, json=body)
    assert answer.status_code == 400
    assert answer.json() == {"error": "bad_request", "reason":
                             "this node is not clustered (start it with --peers or --join)"}


async def test_standalone_nodes_listing_is_a_cluster_of_one(api: Api) -> None:
    """RabbitMQ's fields, and the clustered view's: up since its start, its own
    controller, the leader of every queue."""
    await api.http.put("/api/queues/%2F/q1", json={})
    await api.http.put("/api/queues/%2F/q2", json={})
    [node] = (await api.http.get("/api/nodes")).json()
    assert node["name"] == NODE and node["running"] is True and node["type"] == "disc"
    assert "uptime" in node and "mem_alarm" in node and "disk_free_alarm" in node
    assert node["status"] == "up" and node["since_ms"] == api.context.started_at_ms
    assert node["role"] == "voter" and node["controller"] is True and node["leader"] is True
    assert node["queue_leaders"] == 2
    assert (node["amqp_port"], node["http_port"], node["cluster_port"]) == (5672, 15672, None)
    assert (await api.http.get(f"/api/nodes/{NODE}")).json()["name"] == NODE
    assert (await api.http.get("/api/nodes/n2")).status_code == 404


# ---------------------------------------------------------------------- clustered


async def test_status_is_the_cluster_document(api: Api) -> None:
    fake = api.cluster()
    answer = await api.http.get("/api/cluster")
    assert answer.status_code == 200
    assert answer.json() == {**fake.document, "clustered": True}


async def test_adding_a_node_answers_201_then_204_for_a_member(api: Api) -> None:
    fake = api.cluster()
    body = {"name": "n4", "host": "10.0.0.4", "cluster_port": 25680}
    assert (await api.http.post("/api/cluster/nodes", json=body)).status_code == 201
    body["name"] = "n2"
    assert (await api.http.post("/api/cluster/nodes", json=body)).status_code == 204
    assert fake.calls == [("add", "n4", "10.0.0.4", 25680), ("add", "n2", "10.0.0.4", 25680)]


@pytest.mark.parametrize("body, field_name", [
    ({"name": "n4", "host": "h"}, "cluster_port"),
    ({"name": "n4", "host": "h", "cluster_port": 0}, "cluster_port"),
    ({"name": "n4", "host": "h", "cluster_port": "x"}, "cluster_port"),
    ({"name": "", "host": "h", "cluster_port": 1}, "name"),
    ({"host": "h", "cluster_port": 1}, "name"),
])
async def test_a_bad_node_body_is_a_400_naming_the_field(
        api: Api, body: dict[str, Any], field_name: str) -> None:
    fake = api.cluster()
    answer = await api.http.post("/api/cluster/nodes", json=body)
    assert answer.status_code == 400
    assert answer.json()["field"] == field_name
    assert fake.calls == []


async def test_removing_a_node_decodes_its_name(api: Api) -> None:
    fake = api.cluster()
    answer = await api.http.delete("/api/cluster/nodes/rabbit%40box")
    assert answer.status_code == 204
    assert fake.calls == [("remove", "rabbit@box")]


@pytest.mark.parametrize("code, status", [(404, 404), (406, 400), (541, 503)])
async def test_cluster_refusals_map_to_http_statuses(api: Api, code: int, status: int) -> None:
    fake = api.cluster()
    fake.error = BrokerError(code, f"refused with {code}")
    answer = await api.http.delete("/api/cluster/nodes/n3")
    assert answer.status_code == status
    assert answer.json()["reason"] == f"refused with {code}"
    answer = await api.http.post("/api/cluster/nodes",
                                 json={"name": "n4", "host": "h", "cluster_port": 1})
    assert answer.status_code == status


async def test_monitoring_may_look_but_not_change(api: Api) -> None:
    fake = api.cluster()
    assert (await api.monitor.get("/api/cluster")).status_code == 200
    assert (await api.monitor.get("/api/nodes")).status_code == 200
    answer = await api.monitor.post("/api/cluster/nodes",
                                    json={"name": "n4", "host": "h", "cluster_port": 1})
    assert answer.status_code == 403
    assert (await api.monitor.delete("/api/cluster/nodes/n3")).status_code == 403
    assert (await api.http.get("/api/cluster", auth=("guest", "wrong"))).status_code == 401
    assert fake.calls == []


async def test_nodes_lists_every_member_with_its_liveness(api: Api) -> None:
    api.cluster()
    nodes = (await api.http.get("/api/nodes")).json()
    assert [n["name"] for n in nodes] == ["n1", "n2", "n3"]
    assert [n["running"] for n in nodes] == [True, True, False]
    assert [n["status"] for n in nodes] == ["up", "up", "down"]
    assert [n["leader"] for n in nodes] == [False, True, False]
    assert [n["since_ms"] for n in nodes] == [SINCE + 1, SINCE + 2, SINCE + 3]
    assert all(n["type"] == "disc" and n["role"] == "voter" for n in nodes)
    assert [(n["amqp_port"], n["http_port"]) for n in nodes] == [
        (5672, 15672), (5673, 15673), (5674, 15674)]
    assert "uptime" in nodes[0] and "uptime" not in nodes[1]  # local details: this node only
    assert nodes[0]["queue_leaders"] == 3


async def test_the_overview_lists_every_members_listeners(api: Api) -> None:
    api.cluster()
    listeners = (await api.http.get("/api/overview")).json()["listeners"]
    assert [(x["node"], x["protocol"], x["ip_address"], x["port"]) for x in listeners] == [
        ("n1", "amqp", "n1.example", 5672), ("n1", "http", "n1.example", 15672),
        ("n1", "clustering", "n1.example", 25672),
        ("n2", "amqp", "n2.example", 5673), ("n2", "http", "n2.example", 15673),
        ("n2", "clustering", "n2.example", 25672),
        ("n3", "amqp", "n3.example", 5674), ("n3", "http", "n3.example", 15674),
        ("n3", "clustering", "n3.example", 25672)]


async def test_a_standalone_overview_lists_its_own_listeners(api: Api) -> None:
    listeners = (await api.http.get("/api/overview")).json()["listeners"]
    assert [(x["node"], x["protocol"], x["port"]) for x in listeners] == [
        (NODE, "amqp", 5672), (NODE, "http", 15672)]


async def test_one_node_of_the_cluster(api: Api) -> None:
    api.cluster()
    node = (await api.http.get("/api/nodes/n3")).json()
    assert node["name"] == "n3" and node["running"] is False and node["status"] == "down"
    assert (await api.http.get("/api/nodes/n9")).status_code == 404
    assert (await api.http.get("/api/overview")).json()["cluster_name"] == "lab"
