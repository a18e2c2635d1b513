"""The Spark source on a 3-node cluster: the queue's leader is killed (SIGKILL) mid-query.

The query lists every node in `brokers`. It reads a replicated queue in small
micro-batches while messages are still being published; the leader node is
killed; the connector moves to another node (a connection error) and to the
queue's new leader or an in-sync follower, and the query goes on. Every
confirmed message is in the output exactly once, in offset order.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.cluster.cluster_nodes import Node, queue_leader, running_cluster
from tests.integration.conftest import wait_for
from tests.integration.spark.spark_helpers import BatchCollector, wait_until

AUTH = ("guest", "guest")
QUEUE = "spark-failover"
REPLICATED = {"x-queue-replicas": 3}
TOTAL = 3000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Node]]:
    with running_cluster(tmp_path_factory.mktemp("spark-cluster")) as nodes:
        yield nodes


def publish_confirmed(nodes: list[Node], bodies: list[str]) -> list[str]:
    """Publish through any node that answers; the bodies that were confirmed."""
    messages = [{"routing_key": QUEUE, "payload": body, "properties": {"delivery_mode": 2}}
                for body in bodies]
    for node in nodes:
        try:
            answer = httpx.post(f"{node.url}/api/exchanges/%2F/amq.default/publish-batch",
                                json={"messages": messages}, auth=AUTH, timeout=10.0)
        except httpx.HTTPError:
            continue
        if answer.status_code == 200:
            results = answer.json()["results"]
            return [b for b, r in zip(bodies, results, strict=True) if r["confirmed"]]
    return []


def test_a_query_goes_on_when_the_queues_leader_is_killed(
        spark: Any, cluster: list[Node], tmp_path: Path) -> None:
    first = cluster[0]
    httpx.put(f"{first.url}/api/queues/%2F/{QUEUE}", auth=AUTH, timeout=10.0, json={
        "durable": True, "arguments": REPLICATED}).raise_for_status()
    wait_for(lambda: len(httpx.get(f"{first.url}/api/queues/%2F/{QUEUE}", auth=AUTH,
                                   timeout=5.0).json().get("in_sync", [])) == 3,
             "every replica in sync", 15.0)
    confirmed: list[str] = []
    confirmed_lock = threading.Lock()
    stop = threading.Event()

    def produce() -> None:
        for start in range(0, TOTAL, 100):
            if stop.is_set():
                return
            live = [node for node in cluster if node.process and node.process.poll() is None]
            done = publish_confirmed(live, [f"m{i}" for i in range(start, start + 100)])
            with confirmed_lock:
                confirmed.extend(done)
            time.sleep(0.05)

    producer = threading.Thread(target=produce)
    producer.start()
    brokers = ",".join(f"http://guest:guest@127.0.0.1:{node.http_port}" for node in cluster)
    collector = BatchCollector(columns=("offset", "body"))
    frame = (spark.readStream.format("logbroker").option("brokers", brokers)
             .option("queue", QUEUE).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "150").option("brokerRetryMs", "60000").load())
    query = (frame.writeStream.foreachBatch(collector).trigger(processingTime="200 milliseconds")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        wait_until(lambda: collector.count() >= 600, "the query's first batches", 60)
        leader = next(node for node in cluster if node.name == queue_leader(first, QUEUE))
        leader.kill()
        survivors = [node for node in cluster if node is not leader]
        wait_for(lambda: queue_leader(survivors[0], QUEUE) != leader.name,
                 "a new leader", 20.0)
        producer.join(120)
        assert not producer.is_alive()
        try:
            wait_until(lambda: {bytes(b).decode() for _, b in collector.rows()}
                       >= set(confirmed), "every confirmed message read", 90)
        except AssertionError as error:
            raise AssertionError(f"{error}: read {collector.count()} of {len(confirmed)} "
                                 f"confirmed; query: {query.exception()} "
                                 f"{query.lastProgress}") from None
        assert query.exception() is None
    finally:
        stop.set()
        query.stop()
        producer.join(30)
    rows = collector.rows()
    bodies = [bytes(body).decode() for _, body in rows]
    offsets = [offset for offset, _ in rows]
    assert len(bodies) == len(set(bodies)), "a message read twice"
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    assert set(confirmed) <= set(bodies)
    assert set(bodies) <= {f"m{i}" for i in range(TOTAL)}
    assert collector.rerun_mismatches == []
    assert len(confirmed) > TOTAL // 2, f"too few confirmed to mean much: {len(confirmed)}"
