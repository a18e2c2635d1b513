"""Federation on a 3-node logbroker cluster: exactly one node runs each link (an exchange's
on the node chosen for it, a queue's on the queue's leader), every node lists every link
with its node, and a link moves when its node is killed (-9), messages still flowing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pika
import pytest

from tests.integration.cluster.cluster_nodes import Node, queue_leader, running_cluster
from tests.integration.conftest import BrokerProcess, start_broker, wait_for
from tests.integration.federation.test_federated_queue import Consumer, publish_many

pytestmark = pytest.mark.slow
GUEST = ("guest", "guest")


def links(node: Node) -> list[dict[str, Any]] | None:
    try:
        return list(httpx.get(f"{node.url}/api/federation-links", auth=GUEST, timeout=5).json())
    except httpx.HTTPError:
        return None


def runners(nodes: list[Node]) -> list[str] | None:
    """The nodes running a link, as every live node lists them (None: they disagree)."""
    seen = {tuple(sorted(link["node"] for link in rows if link["status"] == "running"))
            for node in nodes if node.running and (rows := links(node)) is not None}
    return list(seen.pop()) if len(seen) == 1 else None


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path / "upstream", "--node-name", "fed-upstream")
    try:
        yield broker
    finally:
        broker.stop()


def define_upstream(http: httpx.Client, upstream: BrokerProcess) -> None:
    uri = f"amqp://guest:guest@127.0.0.1:{upstream.amqp_port}/%2F"
    reply = http.put("/api/parameters/federation-upstream/%2F/up", json={"value": {
        "uri": uri, "ack-mode": "on-confirm", "reconnect-delay": 0.5}})
    assert reply.status_code in (201, 204), reply.text


def test_one_node_runs_the_link_and_it_moves_when_that_node_dies(
        tmp_path: Path, upstream: BrokerProcess) -> None:
    (tmp_path / "cluster").mkdir()
    with running_cluster(tmp_path / "cluster") as nodes:
        with httpx.Client(base_url=nodes[0].url, auth=GUEST, timeout=10) as http:
            define_upstream(http, upstream)
            http.put("/api/exchanges/%2F/fed-x", json={"type": "fanout", "durable": True})
            http.put("/api/queues/%2F/fed-q", json={
                "durable": True, "arguments": {"x-queue-replicas": 3}})
            http.post("/api/bindings/%2F/e/fed-x/q/fed-q", json={"routing_key": ""})
            http.put("/api/policies/%2F/fed", json={
                "pattern": "^fed-x$", "apply-to": "exchanges",
                "definition": {"federation-upstream": "up"}})
        [runner] = wait_for(lambda: (r := runners(nodes)) is not None and len(r) == 1 and r,
                            "every node to list the one link, run by one node", 30)
        time.sleep(1)
        assert runners(nodes) == [runner]  # and it stays one
        a_local_shovel_runs_on_one_node_and_every_node_lists_it(nodes)
        next(node for node in nodes if node.name == runner).kill()
        [successor] = wait_for(
            lambda: (r := runners(nodes)) is not None and r != [runner] and len(r) == 1 and r,
            "another node to take the link", 60)
        with pika.BlockingConnection(pika.ConnectionParameters(
                "127.0.0.1", upstream.amqp_port)) as connection:
            channel = connection.channel()
            channel.confirm_delivery()
            channel.basic_publish("fed-x", "", b"after the failover",
                                  pika.BasicProperties(delivery_mode=2))
        survivor = next(node for node in nodes if node.name == successor)

        def arrived() -> bool:
            queue = httpx.get(f"{survivor.url}/api/queues/%2F/fed-q", auth=GUEST).json()
            return queue.get("messages", 0) >= 1

        wait_for(arrived, "the message through the moved link", 30)


def shovels(node: Node) -> list[tuple[str, str, str]]:
    rows = httpx.get(f"{node.url}/api/shovels", auth=GUEST, timeout=5).json()
    return [(row["name"], row["node"], row["state"]) for row in rows]


def a_local_shovel_runs_on_one_node_and_every_node_lists_it(nodes: list[Node]) -> None:
    """A shovel between two queues of the cluster (amqp://: no connection), wherever
    their leaders are: the node running it consumes and publishes through the cluster."""
    with httpx.Client(base_url=nodes[1].url, auth=GUEST, timeout=10) as http:
        for queue in ("sh-in", "sh-out"):
            http.put(f"/api/queues/%2F/{queue}", json={
                "durable": True, "arguments": {"x-queue-replicas": 3}})
        reply = http.put("/api/parameters/shovel/%2F/inside", json={"value": {
            "src-uri": "amqp://", "src-queue": "sh-in", "dest-uri": "amqp://",
            "dest-queue": "sh-out"}})
        assert reply.status_code == 201, reply.text
        for index in range(100):
            http.post("/api/exchanges/%2F/amq.default/publish", json={
                "routing_key": "sh-in", "payload": f"s{index}",
                "properties": {"delivery_mode": 2}})
    listed = wait_for(lambda: len({tuple(shovels(node)) for node in nodes}) == 1
                      and [row for row in shovels(nodes[0]) if row[2] == "running"],
                      "every node to list the shovel running on one node", 30)
    assert [name for name, _, _ in listed] == ["inside"]

    def moved() -> bool:
        queue = httpx.get(f"{nodes[2].url}/api/queues/%2F/sh-out", auth=GUEST).json()
        return queue.get("messages", 0) == 100

    wait_for(moved, "the shovel to move the 100 messages", 30)


def test_a_queue_link_runs_on_the_queue_leader_and_follows_it(
        tmp_path: Path, upstream: BrokerProcess) -> None:
    count = 2_000
    publish_many(upstream, count)
    (tmp_path / "cluster").mkdir()
    with running_cluster(tmp_path / "cluster") as nodes:
        with httpx.Client(base_url=nodes[0].url, auth=GUEST, timeout=10) as http:
            define_upstream(http, upstream)
            http.put("/api/queues/%2F/work", json={
                "durable": True, "arguments": {"x-queue-replicas": 3}})
            http.put("/api/policies/%2F/fq", json={
                "pattern": "^work$", "apply-to": "queues",
                "definition": {"federation-upstream": "up"}})
        leader = queue_leader(nodes[0], "work")
        wait_for(lambda: runners(nodes) == [leader], "every node to list the link on the "
                 "queue's leader", 30)
        elsewhere = next(node for node in nodes if node.name != leader)
        consumer = Consumer(elsewhere.amqp_port, deadline_s=90)
        consumer.wanted = {f"w{index}".encode() for index in range(count)}
        consumer.start()
        wait_for(lambda: len(consumer.got) > count // 4, "a quarter moved and consumed", 30)
        next(node for node in nodes if node.name == leader).kill()
        successor = wait_for(lambda: (r := runners(nodes)) is not None and len(r) == 1
                             and r[0] != leader and r[0], "the link to move", 60)
        assert queue_leader(elsewhere, "work") == successor  # it follows the leader
        consumer.join(90)
        assert consumer.bodies() == consumer.wanted  # messages kept flowing, none lost
