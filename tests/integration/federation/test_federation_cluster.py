"""A federated exchange on a 3-node logbroker cluster: exactly one node runs the link,
and the link moves to another node when that one is killed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pika
import pytest

from tests.integration.cluster.cluster_nodes import running_cluster
from tests.integration.conftest import start_broker, wait_for

pytestmark = pytest.mark.slow
GUEST = ("guest", "guest")


def links(node: Any) -> list[dict[str, Any]]:
    try:
        return list(httpx.get(f"{node.url}/api/federation-links", auth=GUEST, timeout=5).json())
    except httpx.HTTPError:
        return []


def runners(nodes: list[Any]) -> list[str]:
    return [node.name for node in nodes if node.running
            and any(link["status"] == "running" for link in links(node))]


def test_one_node_runs_the_link_and_it_moves_when_that_node_dies(tmp_path: Path) -> None:
    upstream = start_broker(tmp_path / "upstream", "--node-name", "fed-upstream")
    try:
        (tmp_path / "cluster").mkdir()
        with running_cluster(tmp_path / "cluster") as nodes:
            first = nodes[0]
            with httpx.Client(base_url=first.url, auth=GUEST, timeout=10) as http:
                uri = f"amqp://guest:guest@127.0.0.1:{upstream.amqp_port}/%2F"
                http.put("/api/parameters/federation-upstream/%2F/up", json={"value": {"uri": uri}})
                http.put("/api/exchanges/%2F/fed-x", json={"type": "fanout", "durable": True})
                http.put("/api/queues/%2F/fed-q", json={
                    "durable": True, "arguments": {"x-queue-replicas": 3}})
                http.post("/api/bindings/%2F/e/fed-x/q/fed-q", json={"routing_key": ""})
                http.put("/api/policies/%2F/fed", json={
                    "pattern": "^fed-x$", "apply-to": "exchanges",
                    "definition": {"federation-upstream": "up"}})
            [runner] = wait_for(lambda: len(r := runners(nodes)) == 1 and r,
                                "exactly one node to run the link", 30)
            time.sleep(1)
            assert runners(nodes) == [runner]  # and it stays one
            victim = next(node for node in nodes if node.name == runner)
            victim.kill()
            [successor] = wait_for(lambda: len(r := runners(nodes)) == 1 and r,
                                   "another node to take the link", 60)
            assert successor != runner
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
    finally:
        upstream.stop()
