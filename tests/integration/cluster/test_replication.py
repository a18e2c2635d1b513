"""Replicated queues on a real 3-node cluster: copies on every member, kill -9 of the
queue's leader, automatic election of an in-sync follower, nothing confirmed lost,
unacked messages redelivered, the old leader back as a follower that catches up."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pika
import pytest

from tests.integration.cluster.cluster_nodes import START_TIMEOUT_S, Node, running_cluster
from tests.integration.conftest import wait_for

AUTH = ("guest", "guest")
REPLICATED = {"x-queue-replicas": 3, "x-queue-leader-locator": "client-local"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Node]]:
    with running_cluster(tmp_path_factory.mktemp("replication")) as nodes:
        yield nodes


def view(node: Node, queue: str) -> dict[str, Any]:
    reply = httpx.get(f"{node.url}/api/queues/%2F/{queue}", auth=AUTH, timeout=5.0)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def publish_confirmed(node: Node, queue: str, bodies: list[bytes]) -> None:
    connection = node.amqp()
    channel = connection.channel()
    channel.confirm_delivery()
    for body in bodies:  # pika raises if a publish is nacked
        channel.basic_publish("", queue, body, pika.BasicProperties(delivery_mode=2),
                              mandatory=True)
    connection.close()


def drain(node: Node, queue: str) -> list[tuple[bytes, bool]]:
    """Every message left, acked: (body, redelivered)."""
    connection = node.amqp()
    channel = connection.channel()
    got: list[tuple[bytes, bool]] = []
    while True:
        method, _, body = channel.basic_get(queue)
        if method is None:
            break
        got.append((body, bool(method.redelivered)))
        channel.basic_ack(method.delivery_tag)
    connection.close()
    return got


def test_a_replicated_queue_survives_the_kill_of_its_leader(cluster: list[Node]) -> None:
    first, second, third = cluster
    connection = first.amqp()
    connection.channel().queue_declare("rq", durable=True, arguments=REPLICATED)
    connection.close()
    described = view(second, "rq")
    assert described["leader"] == "n1" and sorted(described["members"]) == ["n1", "n2", "n3"]
    bodies = [f"m{i}".encode() for i in range(300)]
    publish_confirmed(first, "rq", bodies)

    # 100 consumed and acked, 50 delivered and left unacked, when the leader dies
    consumer = first.amqp()
    channel = consumer.channel()
    for _ in range(150):
        method, _, _ = channel.basic_get("rq")
        assert method is not None
        if int(method.delivery_tag) <= 100:
            channel.basic_ack(method.delivery_tag)
    wait_for(lambda: view(first, "rq").get("replica_lag") == {"n2": 0, "n3": 0},
             "the followers to hold every message")
    first.kill()

    def elected() -> str | None:
        leader = view(second, "rq")["leader"]
        return str(leader) if leader != "n1" else None
    new_leader_name = wait_for(elected, "a new leader for rq", 15.0)
    new_leader = second if new_leader_name == "n2" else third
    assert view(new_leader, "rq")["epoch"] == 2

    publish_confirmed(new_leader, "rq", [b"after-failover"])
    got = drain(new_leader, "rq")
    received = [body for body, _ in got]
    assert len(received) == len(set(received)), "a message came twice in one drain"
    expected = set(bodies[100:]) | {b"after-failover"}
    assert expected <= set(received), f"lost: {sorted(expected - set(received))[:10]}"
    assert set(received) <= set(bodies) | {b"after-failover"}
    for body, redelivered in got:
        if body in bodies[:150]:  # delivered before the failover: must be flagged
            assert redelivered, body

    # the old leader comes back as a follower and catches up
    first.start()
    wait_for(lambda: sorted(view(second, "rq")["in_sync"]) == ["n1", "n2", "n3"],
             "n1 back in sync", START_TIMEOUT_S + 15.0)
    assert view(second, "rq")["leader"] == new_leader_name
