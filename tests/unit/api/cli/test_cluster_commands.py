"""`logbroker cluster ...`: parsing, the status table, and the client calls each command makes."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from api.cli import cluster_commands as cluster
from api.cli.options import UsageError
from api.client import AsyncClient, Client, Unavailable
from api.node import build_parser

NOW = 1_700_000_000_000
STATUS: dict[str, Any] = {
    "cluster_name": "lab", "node": "n2", "leader": "n1", "term": 3, "commit_index": 10,
    "applied_index": 10, "clustered": True,
    "nodes": [
        {"name": "n1", "host": "10.0.0.1", "cluster_port": 25672, "amqp_port": 5672,
         "http_port": 15672, "role": "voter", "status": "up", "since_ms": NOW - 3_725_000,
         "connected": True, "queue_leaders": 12},
        {"name": "n2", "host": "10.0.0.2", "cluster_port": 25672, "amqp_port": 5672,
         "http_port": 15672, "role": "voter", "status": "up", "since_ms": NOW - 45_000,
         "connected": True, "queue_leaders": 3},
        {"name": "n3", "host": "::1", "cluster_port": 25673, "amqp_port": 5672,
         "http_port": 15672, "role": "learner", "status": "down", "since_ms": NOW - 120_000,
         "connected": False, "queue_leaders": 0},
    ],
}


@dataclass
class FakeClient:
    nodes: list[str] = field(default_factory=lambda: ["http://guest:guest@n2:15672"])
    document: dict[str, Any] = field(default_factory=lambda: dict(STATUS))
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    def cluster_status(self) -> dict[str, Any]:
        self.calls.append(("status",))
        return self.document

    def add_cluster_node(self, name: str, host: str, cluster_port: int = 25672) -> None:
        self.calls.append(("add", name, host, cluster_port))

    def remove_cluster_node(self, name: str) -> None:
        self.calls.append(("remove", name))


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def run(client: FakeClient, *argv: str) -> int:
    args = parse(*argv)
    code: int = args.handler(client, args)
    return code


# ---------------------------------------------------------------------- parsing


def test_the_subcommands_and_their_handlers() -> None:
    assert parse("cluster", "status").handler is cluster.status
    assert parse("cluster", "status", "--json").json is True
    join = parse("cluster", "join", "n4@10.0.0.4:25672", "--url", "http://a:b@h:1")
    assert (join.handler, join.member, join.url) == (cluster.join, "n4@10.0.0.4:25672",
                                                    "http://a:b@h:1")
    assert parse("cluster", "leave").handler is cluster.leave
    forget = parse("cluster", "forget-node", "n3")
    assert (forget.handler, forget.name) == (cluster.forget_node, "n3")


@pytest.mark.parametrize("argv", [["cluster"], ["cluster", "join"], ["cluster", "forget-node"],
                                  ["cluster", "bogus"]])
def test_incomplete_commands_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse(*argv)
    assert exit_info.value.code == 2


@pytest.mark.parametrize("text, expected", [
    ("n4@10.0.0.4:25680", ("n4", "10.0.0.4", 25680)),
    ("n4@box", ("n4", "box", 25672)),
    ("logbroker@box@10.0.0.4:25672", ("logbroker@box", "10.0.0.4", 25672)),
    ("n4@[::1]:25673", ("n4", "::1", 25673)),
    ("n4@[fe80::1]", ("n4", "fe80::1", 25672)),
])
def test_member_addresses(text: str, expected: tuple[str, str, int]) -> None:
    assert cluster.parse_member(text) == expected


@pytest.mark.parametrize("text", ["n4", "@host:1", "n4@", "n4@:25672", "n4@h:0", "n4@h:x",
                                  "n4@h:70000", "n4@::1:25672", "n4@[::1"])
def test_bad_member_addresses(text: str) -> None:
    with pytest.raises(UsageError):
        cluster.parse_member(text)


# ---------------------------------------------------------------------- the table


@pytest.mark.parametrize("since, text", [
    (NOW - 5_000, "5s ago"), (NOW - 125_000, "2m ago"), (NOW - 3_725_000, "1h02m ago"),
    (NOW - 2 * 86_400_000 - 4 * 3_600_000, "2d04h ago"), (NOW + 10_000, "0s ago"),
    (None, ""), (0, ""), (True, ""),
])
def test_ages(since: Any, text: str) -> None:
    assert cluster.age(since, NOW) == text


def test_the_status_table() -> None:
    lines = cluster.render_status(STATUS, now_ms=NOW).splitlines()
    assert lines[0] == ("cluster lab: leader n1, term 3, commit index 10, applied index 10 "
                        "(as seen by n2)")
    assert lines[1].split() == ["name", "address", "role", "status", "since", "leader",
                                "connected", "queue_leaders"]
    assert lines[2].split() == ["n1", "10.0.0.1:25672", "voter", "up", "1h02m", "ago", "*",
                                "true", "12"]
    assert lines[3].split() == ["n2", "10.0.0.2:25672", "voter", "up", "45s", "ago", "true",
                                "3"]
    assert lines[4].split() == ["n3", "[::1]:25673", "learner", "down", "2m", "ago", "false",
                                "0"]
    assert len(lines) == 5


def test_a_leaderless_and_a_standalone_heading() -> None:
    leaderless = cluster.render_status({**STATUS, "leader": None}, now_ms=NOW)
    assert "leader (none: no quorum?)" in leaderless.splitlines()[0]
    assert "*" not in leaderless
    alone = {"node": "solo", "leader": "solo", "clustered": False,
             "nodes": [{"name": "solo", "host": "127.0.0.1", "cluster_port": None,
                        "role": "voter", "status": "up", "since_ms": NOW, "connected": True,
                        "queue_leaders": 0}]}
    lines = cluster.render_status(alone, now_ms=NOW).splitlines()
    assert lines[0].startswith("node solo is not clustered")
    assert lines[2].split()[:2] == ["solo", "127.0.0.1"]


def test_status_prints_the_table_or_json(capsys: pytest.CaptureFixture[str]) -> None:
    client = FakeClient()
    assert run(client, "cluster", "status") == 0
    assert capsys.readouterr().out.startswith("cluster lab: leader n1")
    assert run(client, "cluster", "status", "--json") == 0
    assert json.loads(capsys.readouterr().out) == STATUS


# ---------------------------------------------------------------------- changes


def test_join_adds_the_node(capsys: pytest.CaptureFixture[str]) -> None:
    client = FakeClient()
    assert run(client, "cluster", "join", "n4@10.0.0.4:25680") == 0
    assert client.calls == [("add", "n4", "10.0.0.4", 25680)]
    assert "n4" in capsys.readouterr().out


def test_join_refuses_a_bad_address_before_asking() -> None:
    client = FakeClient()
    with pytest.raises(UsageError):
        run(client, "cluster", "join", "n4")
    assert client.calls == []


def test_leave_removes_the_node_that_answers() -> None:
    client = FakeClient()
    assert run(client, "cluster", "leave") == 0
    assert client.calls == [("status",), ("remove", "n2")]


def test_leave_wants_exactly_one_url() -> None:
    client = FakeClient(nodes=["http://a:1", "http://b:2"])
    with pytest.raises(UsageError, match="exactly one --url"):
        run(client, "cluster", "leave")
    assert client.calls == []


def test_forget_node_removes_the_named_node() -> None:
    client = FakeClient()
    assert run(client, "cluster", "forget-node", "n3") == 0
    assert client.calls == [("remove", "n3")]


# ---------------------------------------------------------------------- the client calls


def recording(log: list[tuple[str, str, Any]], status: int = 204) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        log.append((request.method, request.url.raw_path.decode(), body))
        if request.method == "GET":
            return httpx.Response(200, json=STATUS)
        if status >= 400:
            return httpx.Response(status, json={"error": "unavailable", "reason": "no quorum"})
        return httpx.Response(status)
    return httpx.MockTransport(handle)


def test_the_sync_client_requests() -> None:
    log: list[tuple[str, str, Any]] = []
    with Client("http://guest:guest@a:1", transport=recording(log)) as client:
        assert client.cluster_status() == STATUS
        client.add_cluster_node("n4", "10.0.0.4", 25680)
        client.remove_cluster_node("rabbit@box")
    assert log == [
        ("GET", "/api/cluster", None),
        ("POST", "/api/cluster/nodes", {"name": "n4", "host": "10.0.0.4",
                                        "cluster_port": 25680}),
        ("DELETE", "/api/cluster/nodes/rabbit%40box", None),
    ]


async def test_the_async_client_requests() -> None:
    log: list[tuple[str, str, Any]] = []

    async def handle(request: httpx.Request) -> httpx.Response:
        return recording(log).handle_request(request)

    transport = httpx.MockTransport(handle)
    async with AsyncClient("http://guest:guest@a:1", transport=transport) as client:
        assert await client.cluster_status() == STATUS
        await client.add_cluster_node("n4", "h")
        await client.remove_cluster_node("n3")
    assert log == [("GET", "/api/cluster", None),
                   ("POST", "/api/cluster/nodes", {"name": "n4", "host": "h",
                                                   "cluster_port": 25672}),
                   ("DELETE", "/api/cluster/nodes/n3", None)]


def test_no_quorum_is_unavailable() -> None:
    log: list[tuple[str, str, Any]] = []
    with Client("http://guest:guest@a:1", transport=recording(log, status=503)) as client, \
            pytest.raises(Unavailable, match="no quorum"):
        client.add_cluster_node("n4", "h", 1)
