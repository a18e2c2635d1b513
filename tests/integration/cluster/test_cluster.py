"""A real 3-node cluster on 127.0.0.1: replicated definitions, placement, any-node
access with pika, the Raft leader killed with SIGKILL, catch-up, a minority, a
wrong secret.

The tests share one cluster (starting it costs a few seconds) and run in file
order: placement first (it counts queue leaders over the whole cluster), the
destructive ones last.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from tests.integration.cluster.cluster_nodes import (
    START_TIMEOUT_S,
    Node,
    leader_of,
    make_node,
    queue_leader,
    ready,
    running_cluster,
)
from tests.integration.conftest import free_port, wait_for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Node]]:
    with running_cluster(tmp_path_factory.mktemp("cluster")) as nodes:
        yield nodes


def test_balanced_placement_spreads_30_queues_10_10_10(cluster: list[Node]) -> None:
    connection = cluster[0].amqp()
    channel = connection.channel()
    for i in range(30):
        channel.queue_declare(f"balanced-{i}", durable=True,
                              arguments={"x-queue-leader-locator": "balanced"})
    connection.close()
    placed = Counter(queue_leader(cluster[1], f"balanced-{i}") for i in range(30))
    assert placed == {"n1": 10, "n2": 10, "n3": 10}
    view = httpx.get(f"{cluster[2].url}/api/queues/%2F/balanced-0", auth=("guest", "guest"),
                     timeout=5.0).json()
    assert view["members"] == [view["leader"]] and view["online"] == [view["leader"]]


def test_client_local_and_random_placement(cluster: list[Node]) -> None:
    for node in cluster:
        connection = node.amqp()
        connection.channel().queue_declare(f"local-{node.name}", durable=True)  # the default
        connection.close()
        assert queue_leader(cluster[0], f"local-{node.name}") == node.name
    connection = cluster[0].amqp()
    channel = connection.channel()
    for i in range(12):
        channel.queue_declare(f"random-{i}", arguments={"x-queue-master-locator": "random"})
    connection.close()
    placed = {queue_leader(cluster[0], f"random-{i}") for i in range(12)}
    assert len(placed) >= 2  # 12 draws over 3 nodes all on one node: p < 1e-5


def test_definitions_made_on_one_node_are_visible_on_all(cluster: list[Node]) -> None:
    auth = ("guest", "guest")
    first = cluster[0].url
    assert httpx.put(f"{first}/api/exchanges/%2F/orders", json={"type": "topic"},
                     auth=auth).status_code in (201, 204)
    assert httpx.put(f"{first}/api/policies/%2F/ttl", json={
        "pattern": "^ttl\\.", "definition": {"message-ttl": 60000}, "apply-to": "queues"},
        auth=auth).status_code in (201, 204)
    assert httpx.put(f"{first}/api/users/alice", json={"password": "pw", "tags": ""},
                     auth=auth).status_code in (201, 204)
    for node in cluster[1:]:
        def seen(url: str = node.url) -> bool:
            return all(httpx.get(f"{url}{path}", auth=auth).status_code == 200 for path in (
                "/api/exchanges/%2F/orders", "/api/policies/%2F/ttl", "/api/users/alice"))
        wait_for(seen, f"the definitions on {node.name}")


def test_publish_and_consume_through_nodes_that_do_not_lead_the_queue(
        cluster: list[Node]) -> None:
    leader_connection = cluster[0].amqp()
    leader_connection.channel().queue_declare("forwarded", durable=True)  # led by n1
    leader_connection.close()
    publisher = cluster[1].amqp()
    channel = publisher.channel()
    channel.confirm_delivery()
    bodies = [f"m{i}".encode() for i in range(300)]
    for body in bodies:
        channel.basic_publish("", "forwarded", body, pika.BasicProperties(delivery_mode=2))
    consumer = cluster[2].amqp()
    reader = consumer.channel()
    reader.basic_qos(prefetch_count=20)
    assert reader.queue_declare("forwarded", passive=True).method.message_count == 300
    got = []
    for method, _properties, body in reader.consume("forwarded", inactivity_timeout=3):
        if method is None:
            break
        got.append(body)
        reader.basic_ack(method.delivery_tag)
        if len(got) == len(bodies):
            break
    reader.cancel()
    assert got == bodies  # all of them, in publish order
    channel.basic_publish("", "forwarded", b"again", pika.BasicProperties(delivery_mode=2))
    method, _, body = reader.basic_get("forwarded")
    assert body == b"again" and method is not None and not method.redelivered
    reader.basic_nack(method.delivery_tag, requeue=True)
    method, _, body = reader.basic_get("forwarded", auto_ack=True)
    assert body == b"again" and method is not None and method.redelivered
    assert reader.queue_declare("forwarded", passive=True).method.message_count == 0
    publisher.close()
    consumer.close()


def test_every_node_shows_cluster_wide_figures(cluster: list[Node]) -> None:
    """A node that does not lead a queue shows its leader's counts and range, and counts it
    in its overview (they were blank, and `status` said `queues 0`)."""
    connection = cluster[0].amqp()
    channel = connection.channel()
    channel.queue_declare("figures", durable=True)  # led by n1
    channel.confirm_delivery()
    for i in range(7):
        channel.basic_publish("", "figures", f"f{i}".encode(),
                              pika.BasicProperties(delivery_mode=2))
    connection.close()
    auth = ("guest", "guest")
    for node in cluster[1:]:
        one = httpx.get(f"{node.url}/api/queues/%2F/figures", auth=auth, timeout=5.0).json()
        listed = next(q for q in httpx.get(f"{node.url}/api/queues", auth=auth,
                                           timeout=5.0).json() if q["name"] == "figures")
        for view in (one, listed):
            assert view["leader"] == "n1"
            assert (view["messages_ready"], view["first_offset"], view["next_offset"]) == (
                7, 0, 7), view
        overview = httpx.get(f"{node.url}/api/overview", auth=auth, timeout=5.0).json()
        assert overview["object_totals"]["queues"] == len(
            httpx.get(f"{node.url}/api/queues", auth=auth, timeout=5.0).json())
        assert overview["queue_totals"]["messages_ready"] >= 7


def test_killing_the_raft_leader_elects_another_and_a_restarted_node_catches_up(
        cluster: list[Node]) -> None:
    old = leader_of(cluster)
    survivors = [node for node in cluster if node is not old]
    connection = old.amqp()
    connection.channel().queue_declare(f"led-by-{old.name}", durable=True)
    connection.close()
    old.kill()
    new = leader_of(survivors)
    assert new.name != old.name
    connection = survivors[0].amqp()
    channel = connection.channel()
    channel.queue_declare("declared-while-down", durable=True)  # definitions change again
    wait_for(lambda: any(n["name"] == old.name and n["status"] == "down"
                         for n in (survivors[1].status() or {"nodes": []})["nodes"]),
             f"{old.name} reported down", 10.0)
    with pytest.raises(ChannelClosedByBroker) as refused:
        channel.queue_declare(f"led-by-{old.name}", passive=True)
    assert refused.value.reply_code == 404
    assert f"home node '{old.name}'" in refused.value.reply_text
    connection.close()
    old.start()
    wait_for(lambda: ready(cluster), "the restarted node to rejoin", START_TIMEOUT_S)
    view = httpx.get(f"{old.url}/api/queues/%2F/declared-while-down", auth=("guest", "guest"))
    assert view.status_code == 200  # caught up from the log (or a snapshot)
    connection = survivors[0].amqp()
    assert connection.channel().queue_declare(
        f"led-by-{old.name}", passive=True).method.message_count == 0
    connection.close()


def test_a_node_with_the_wrong_secret_is_refused(cluster: list[Node], tmp_path: Path) -> None:
    wrong = tmp_path / "wrong-secret"
    wrong.write_text("not-the-secret\n")
    wrong.chmod(0o600)
    ports = {"amqp": free_port(), "http": free_port(), "cluster": free_port()}
    intruder = make_node(tmp_path, "intruder", "", wrong, ports, "--join",
                         f"n1@127.0.0.1:{cluster[0].cluster_port}")
    intruder.start()
    try:
        wait_for(lambda: "wrong cluster secret" in cluster[0].log(), "the refusal logged",
                 10.0)
        assert all(n["name"] != "intruder" for n in (cluster[0].status() or {})["nodes"])
    finally:
        intruder.kill()


def test_a_minority_cannot_change_definitions(cluster: list[Node]) -> None:
    lone, *others = cluster
    for node in others:
        node.kill()
    try:
        started = time.monotonic()
        reply = httpx.put(f"{lone.url}/api/queues/%2F/minority-queue", json={"durable": True},
                          auth=("guest", "guest"), timeout=30.0)
        elapsed = time.monotonic() - started
        assert reply.status_code == 503, reply.text
        assert "majority" in reply.json()["reason"]
        assert elapsed < 15.0  # a clear error, not a hang
        assert httpx.get(f"{lone.url}/api/queues/%2F/balanced-0",
                         auth=("guest", "guest")).status_code == 200  # reads still work
    finally:
        for node in others:
            node.start()
    wait_for(lambda: ready(cluster), "the cluster to re-form", START_TIMEOUT_S)
