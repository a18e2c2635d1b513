"""Transactional batch publish in a 3-node cluster: staged parts and commits survive the
loss (SIGKILL) of the node that took the stage and led the batch's staging queue.

The parts were confirmed on every in-sync replica of the staging queue before the
stage was answered, so after the failover the new leader of that queue holds them:
the commit, sent to another node, is sent on (421) to it and publishes the batch
exactly once; a commit sent again is answered `duplicate`.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from api.client import Client
from tests.integration.cluster.cluster_nodes import Node, queue_leader, running_cluster
from tests.integration.conftest import wait_for

AUTH = ("guest", "guest")
REPLICATED = {"x-queue-replicas": 3}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Node]]:
    with running_cluster(tmp_path_factory.mktemp("producer-batches")) as nodes:
        yield nodes


def url(node: Node) -> str:
    return f"http://guest:guest@127.0.0.1:{node.http_port}"


def staging_queue(node: Node) -> str:
    names = [q["name"] for q in httpx.get(f"{node.url}/api/queues", auth=AUTH,
                                          timeout=5.0).json()
             if q["name"].startswith("amq.staging.")]
    assert len(names) == 1, names
    return str(names[0])


def test_a_batch_staged_on_a_killed_node_commits_once_elsewhere(
        cluster: list[Node]) -> None:
    first, second, _ = cluster
    with Client(url(second)) as client:
        client.declare_queue("tx-target", arguments=REPLICATED)
    wait_for(lambda: len(httpx.get(f"{second.url}/api/queues/%2F/tx-target", auth=AUTH,
                                   timeout=5.0).json().get("in_sync", [])) == 3,
             "the target in sync on every node", 15.0)
    bodies = [f"b{i}" for i in range(300)]
    with Client(url(first)) as client:
        parts = client.stage_batch("sink-1", 7, bodies, routing_key="tx-target",
                                   part_size=100)
    staging = staging_queue(second)
    leader = next(node for node in cluster if node.name == queue_leader(second, staging))
    leader.kill()
    survivors = [node for node in cluster if node is not leader]
    for queue in (staging, "tx-target"):
        wait_for(lambda queue=queue: queue_leader(survivors[0], queue) != leader.name,
                 f"a new leader of {queue}", 20.0)
    committer = survivors[-1]
    with Client(",".join(url(node) for node in (committer, *survivors))) as client:
        answer = client.commit_batch("sink-1", 7, parts)
        assert (answer["duplicate"], answer["messages"]) == (False, 300)
        assert client.commit_batch("sink-1", 7, parts)["duplicate"] is True
        got = [record.body.decode() for record in client.replay("tx-target", from_offset=0)]
    assert got == bodies
    leader.start()
