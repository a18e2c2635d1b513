"""Consumer groups and replay from followers on a real 3-node cluster.

Offsets committed through one node are read, with lag, through another; a
replicated queue's replay is served by a follower with the leader's records
and never past what the leader has committed; a node without a copy sends the
reader to the leader (421), which the CLI follows; and after kill -9 of the
Raft leader the group's offsets are still there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from typing import Any

import httpx
import pytest

from tests.integration.cluster.cluster_nodes import Node, leader_of, queue_leader, running_cluster
from tests.integration.conftest import wait_for

AUTH = ("guest", "guest")
REPLICATED = {"x-queue-replicas": 3, "x-queue-leader-locator": "client-local"}
SINGLE = {"x-queue-replicas": 1, "x-queue-leader-locator": "client-local"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Node]]:
    with running_cluster(tmp_path_factory.mktemp("groups")) as nodes:
        yield nodes


def call(node: Node, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return httpx.request(method, f"{node.url}{path}", auth=AUTH, timeout=10.0, **kwargs)


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, (response.status_code, response.text)
    return response.json() if response.content else None


def publish(node: Node, queue: str, count: int) -> None:
    messages = [{"routing_key": queue, "payload": f"{queue}-{i}"} for i in range(count)]
    results = ok(call(node, "POST", "/api/exchanges/%2F/amq.default/publish-batch",
                      json={"messages": messages}))["results"]
    assert all(result["confirmed"] for result in results)


def replay(node: Node, queue: str, **params: Any) -> httpx.Response:
    return call(node, "GET", f"/api/queues/%2F/{queue}/messages",
                params={"from_offset": 0, "max_messages": 10_000, **params})


def committed(node: Node, group: str = "query-1") -> dict[str, int] | None:
    answer = call(node, "GET", f"/api/consumer-groups/%2F/{group}")
    if answer.status_code != 200:
        return None
    return {q["queue"]: q["committed_offset"] for q in answer.json()["queues"]}


def test_groups_and_follower_replay_across_the_cluster(cluster: list[Node]) -> None:
    n1, n2, n3 = cluster
    ok(call(n1, "PUT", "/api/queues/%2F/gq", json={"arguments": REPLICATED}), 201)
    ok(call(n1, "PUT", "/api/queues/%2F/solo", json={"arguments": SINGLE}), 201)
    assert queue_leader(n2, "gq") == "n1" and queue_leader(n2, "solo") == "n1"
    publish(n1, "gq", 50)
    publish(n1, "solo", 5)

    # Committed through n2, read with lag through n3 (ranges asked of the leader, n1).
    ok(call(n2, "PUT", "/api/consumer-groups/%2F/query-1",
            json={"offsets": {"gq": 10, "solo": 2}}), 204)

    def lag_on_n3() -> dict[str, Any] | None:
        answer = call(n3, "GET", "/api/consumer-groups/%2F/query-1")
        return answer.json() if answer.status_code == 200 else None
    view = wait_for(lag_on_n3, "the group on n3")
    queues = {q["queue"]: q for q in view["queues"]}
    assert (queues["gq"]["end_offset"], queues["gq"]["lag"]) == (50, 40)
    assert (queues["solo"]["end_offset"], queues["solo"]["lag"]) == (5, 3)
    assert view["lag"] == 43
    names = [g["name"] for g in ok(call(n2, "GET", "/api/consumer-groups"))]
    assert names == ["query-1"]

    # A follower serves the replicated queue: the leader's records, never past its end.
    leader_page = ok(replay(n1, "gq"))

    def follower_caught_up(node: Node) -> dict[str, Any] | None:
        answer = replay(node, "gq")
        page = answer.json() if answer.status_code == 200 else None
        return page if page is not None and page["end_offset"] == 50 else None
    for follower in (n2, n3):
        page = wait_for(partial(follower_caught_up, follower), "a follower to serve gq")
        assert page["messages"] == leader_page["messages"]
        assert (page["next_offset"], page["first_offset"]) == (50, 0)
        raw = replay(follower, "gq", format="batches")
        assert (raw.status_code, raw.headers["X-Next-Offset"]) == (200, "50")
    publish(n1, "gq", 30)
    for _ in range(20):  # while the follower catches up, it never shows more than the leader
        page = ok(replay(n2, "gq"))
        leader_end = ok(replay(n1, "gq", from_offset=80))["end_offset"]
        assert page["end_offset"] <= leader_end
        assert [m["offset"] for m in page["messages"]] == list(range(page["end_offset"]))

    # A node with no copy of `solo` sends the reader to its leader; the CLI follows.
    elsewhere = replay(n2, "solo")
    assert elsewhere.status_code == 421
    assert elsewhere.headers["X-Queue-Leader-Url"] == n1.url
    env = {**os.environ, "LOGBROKER_URL": f"{n3.url},{n2.url}"}
    result = subprocess.run([sys.executable, "-m", "logbroker", "replay", "solo",
                             "--from-offset", "1"], capture_output=True, env=env,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().split() == [f"solo-{i}" for i in range(1, 5)]

    # kill -9 of the Raft leader: the group's offsets are still there, and can move on.
    raft_leader = leader_of(cluster)
    raft_leader.kill()
    survivors = [node for node in cluster if node is not raft_leader]
    for node in survivors:
        assert wait_for(partial(committed, node), "the group after the kill",
                        15.0) == {"gq": 10, "solo": 2}
    wait_for(lambda: call(survivors[0], "PUT", "/api/consumer-groups/%2F/query-1",
                          json={"offsets": {"gq": 20}}).status_code == 204,
             "a commit after the failover", 20.0)
    assert wait_for(lambda: committed(survivors[1]) == {"gq": 20, "solo": 2},
                    "the new commit on the other survivor", 10.0)
    ok(call(survivors[1], "DELETE", "/api/consumer-groups/%2F/query-1"), 204)
    assert wait_for(lambda: committed(survivors[0]) is None, "the group gone", 10.0)
