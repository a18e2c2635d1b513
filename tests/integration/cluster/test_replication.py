"""Replicated queues on a real 3-node cluster: copies on every member, kill -9 of the
queue's leader, automatic election of an in-sync follower, nothing confirmed lost,
unacked messages redelivered, the old leader back as a follower that catches up."""

from __future__ import annotations

import hashlib
import shutil
import signal
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pika
import pytest

from tests.integration.cluster.cluster_nodes import (
    START_TIMEOUT_S,
    Node,
    ready,
    running_cluster,
)
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


def followers_caught_up(leader: Node, queue: str) -> bool:
    return view(leader, queue).get("replica_lag") == {"n2": 0, "n3": 0}


class Consumers:
    """Two pika consumers on one channel, on a node that does not lead their queue: one
    follows the leader when it moves, one asked for basic.cancel instead."""

    def __init__(self, node: Node, queue: str) -> None:
        self.connection = node.amqp()
        channel = self.connection.channel()
        channel.basic_qos(prefetch_count=10)
        self.got: dict[str, list[bytes]] = {"follows": [], "told": []}
        self.cancelled: list[str] = []
        channel.add_on_cancel_callback(
            lambda frame: self.cancelled.append(frame.method.consumer_tag))
        for tag, arguments in (("follows", {}), ("told", {"x-cancel-on-ha-failover": True})):
            channel.basic_consume(queue, self._on_message, consumer_tag=tag,
                                  arguments=arguments)

    def _on_message(self, channel: Any, method: Any, _properties: Any, body: bytes) -> None:
        self.got[method.consumer_tag].append(body)
        channel.basic_ack(method.delivery_tag)

    def received(self, bodies: list[bytes]) -> bool:
        self.connection.process_data_events(time_limit=0.1)
        return set(bodies) <= set(self.got["follows"] + self.got["told"])


def test_a_replicated_queue_survives_the_kill_of_its_leader(cluster: list[Node]) -> None:
    first, second, third = cluster
    connection = first.amqp()
    connection.channel().queue_declare("rq", durable=True, arguments=REPLICATED)
    connection.channel().queue_declare("followed", durable=True, arguments=REPLICATED)
    connection.close()
    consumers = Consumers(second, "followed")
    early = [f"e{i}".encode() for i in range(10)]
    publish_confirmed(first, "followed", early)
    wait_for(lambda: consumers.received(early), "the consumers on n2 to get messages")
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
    for queue in ("rq", "followed"):
        wait_for(partial(followers_caught_up, first, queue), "the followers to hold every message")
    first.kill()

    def elected() -> str | None:
        leader = view(second, "rq")["leader"]
        return str(leader) if leader != "n1" else None
    new_leader_name = wait_for(elected, "a new leader for rq", 15.0)
    new_leader = second if new_leader_name == "n2" else third
    assert view(new_leader, "rq")["epoch"] == 2

    publish_confirmed(new_leader, "rq", [b"after-failover"])
    # The consumer without x-cancel-on-ha-failover was resubscribed to the new leader.
    late = [f"l{i}".encode() for i in range(20)]
    publish_confirmed(new_leader, "followed", late)
    wait_for(lambda: consumers.received(late), "the following consumer to get new messages")
    assert consumers.cancelled == ["told"]
    assert set(late) <= set(consumers.got["follows"])
    consumers.connection.close()
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
    wait_for(lambda: ready(cluster), "every node up again", START_TIMEOUT_S)


def action(node: Node, queue: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{node.url}/api/queues/%2F/{queue}/actions", json=body, auth=AUTH,
                      timeout=30.0)


def declare_on(node: Node, queue: str, arguments: dict[str, Any] | None = None) -> None:
    connection = node.amqp()
    connection.channel().queue_declare(queue, durable=True,
                                       arguments={**REPLICATED, **(arguments or {})})
    connection.close()
    assert sorted(view(node, queue)["members"]) == ["n1", "n2", "n3"]


def all_in_sync(node: Node, queue: str) -> bool:
    return sorted(view(node, queue)["in_sync"]) == ["n1", "n2", "n3"]


def test_transfer_leader_moves_a_queue_without_losing_a_message(cluster: list[Node]) -> None:
    first, second, third = cluster
    declare_on(second, "moving")
    bodies = [f"t{i}".encode() for i in range(200)]
    publish_confirmed(first, "moving", bodies)  # through a node that does not lead it
    wait_for(lambda: all_in_sync(second, "moving"), "every replica in sync")
    reply = action(first, "moving", {"action": "transfer_leader", "node": "n3"})
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"leader": "n3"}
    described = view(third, "moving")
    assert (described["leader"], described["epoch"]) == ("n3", 2)
    refused = action(first, "moving", {"action": "transfer_leader", "node": "n9"})
    assert refused.status_code == 400 and "not a member" in refused.json()["reason"]
    got = drain(third, "moving")
    assert sorted(body for body, _ in got) == sorted(bodies)
    metrics = httpx.get(f"{third.url}/metrics", timeout=5.0).text
    assert 'logbroker_queue_high_watermark{queue="moving",vhost="/"} 200.0' in metrics
    assert 'logbroker_queue_in_sync_replicas{queue="moving",vhost="/"} 3.0' in metrics
    assert 'logbroker_queue_replica_lag_messages{queue="moving",replica="n2",vhost="/"}' \
        in metrics
    assert "logbroker_queue_handovers_total 1.0" in httpx.get(f"{second.url}/metrics",
                                                             timeout=5.0).text


def test_rebalance_spreads_replicated_leaders(cluster: list[Node]) -> None:
    for i in range(3):
        declare_on(cluster[0], f"lopsided-{i}")
    for i in range(3):
        wait_for(lambda i=i: all_in_sync(cluster[0], f"lopsided-{i}"), "replicas in sync")
    reply = httpx.post(f"{cluster[1].url}/api/rebalance/queues", auth=AUTH, timeout=60.0)
    assert reply.status_code == 200, reply.text
    leaders = {view(cluster[0], f"lopsided-{i}")["leader"] for i in range(3)}
    # every replicated queue counts: the three new ones end on three different nodes
    # unless others already balance the cluster; either way no node leads two more
    status = httpx.get(f"{cluster[0].url}/api/cluster", auth=AUTH).json()
    counts = [n["queue_leaders"] for n in status["nodes"]]
    assert max(counts) - min(counts) <= 1 or len(leaders) == 3, (counts, reply.json())


def test_manual_sync_mode_and_sync_action(cluster: list[Node]) -> None:
    first, second, third = cluster
    assert httpx.put(f"{first.url}/api/policies/%2F/manual", json={
        "pattern": "^manual$", "apply-to": "queues",
        "definition": {"ha-mode": "all", "ha-sync-mode": "manual"}},
        auth=AUTH).status_code in (201, 204)
    declare_on(first, "manual")
    publish_confirmed(first, "manual", [f"old{i}".encode() for i in range(50)])
    wait_for(lambda: all_in_sync(first, "manual"), "every replica in sync")
    # n3 goes down long enough to leave the in-sync set, and loses its copy: back
    # empty, under manual sync it takes new messages only
    third.kill()
    publish_confirmed(first, "manual", [b"while-down"])
    wait_for(lambda: "n3" not in view(first, "manual")["in_sync"], "n3 out of sync", 15.0)
    queue_dir = third.data_dir / "queues" / queue_digest("/", "manual")
    shutil.rmtree(queue_dir)
    third.start()
    wait_for(lambda: ready(cluster), "n3 up again", START_TIMEOUT_S)
    wait_for(lambda: view(first, "manual").get("replica_lag", {}).get("n3") == 0,
             "n3 to follow from the leader's end", 10.0)
    publish_confirmed(first, "manual", [b"new"])
    assert "n3" not in view(first, "manual")["in_sync"]  # it lacks the 50 old ones
    reply = action(second, "manual", {"action": "sync"})
    assert reply.status_code == 204, reply.text
    wait_for(lambda: all_in_sync(first, "manual"), "n3 in sync after a full copy", 20.0)
    assert len(drain(first, "manual")) == 52


def queue_digest(vhost: str, name: str) -> str:
    return hashlib.sha256(f"{vhost}\0{name}".encode()).hexdigest()[:32]


def test_a_controlled_shutdown_hands_queues_over_first(cluster: list[Node]) -> None:
    first, second, third = cluster
    declare_on(third, "handed")
    bodies = [f"h{i}".encode() for i in range(100)]
    publish_confirmed(third, "handed", bodies)
    wait_for(lambda: all_in_sync(first, "handed"), "every replica in sync")
    third.stop()  # SIGTERM
    described = view(first, "handed")
    assert described["leader"] in ("n1", "n2") and described["epoch"] == 2
    survivor = first if described["leader"] == "n1" else second
    got = drain(survivor, "handed")
    assert sorted(body for body, _ in got) == sorted(bodies)
    third.start()
    wait_for(lambda: ready(cluster), "n3 up again", START_TIMEOUT_S)
    wait_for(lambda: all_in_sync(first, "handed"), "n3 back in sync", 10.0)


def test_nodes_stopped_together_pass_no_queue_between_them(cluster: list[Node]) -> None:
    """The whole cluster gets SIGTERM at once (a dev cluster stopped): no node hands a
    queue to another that is stopping too (they passed queues back and forth, and a
    stopping node opened one while its old leader still held it: DataDirLockedError)."""
    first, _, third = cluster
    declare_on(third, "together")
    bodies = [f"t{i}".encode() for i in range(50)]
    publish_confirmed(third, "together", bodies)
    wait_for(lambda: all_in_sync(first, "together"), "every replica in sync")
    stopping = [node.process for node in cluster if node.process is not None]
    for process in stopping:
        process.send_signal(signal.SIGTERM)
    for process in stopping:
        process.wait(30)
    for node in cluster:
        log = node.log()
        assert "DataDirLockedError" not in log and "Traceback" not in log, log[-3000:]
        node.start()
    wait_for(lambda: ready(cluster), "the cluster up again", START_TIMEOUT_S)
    # A node that had not begun to stop yet may take the queue once; none passes it on.
    assert view(first, "together")["epoch"] <= 2
    assert sorted(body for body, _ in drain(first, "together")) == sorted(bodies)


def publish_batches(node: Node, queue: str, count: int, payload: str) -> None:
    """`count` persistent messages through the HTTP batch publish, every one confirmed."""
    message = {"routing_key": queue, "payload": payload, "properties": {"delivery_mode": 2}}
    for start in range(0, count, 1000):
        reply = httpx.post(f"{node.url}/api/exchanges/%2F/amq.default/publish-batch",
                           json={"messages": [message] * min(1000, count - start)},
                           auth=AUTH, timeout=60.0)
        assert reply.status_code == 200, reply.text
        assert all(result["confirmed"] for result in reply.json()["results"])


def rss_bytes(node: Node) -> int:
    assert node.process is not None
    for line in Path(f"/proc/{node.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_a_replica_catches_up_without_blocking_the_queue_or_growing_the_leader(
        cluster: list[Node]) -> None:
    first, _, third = cluster
    declare_on(first, "backlog")
    wait_for(lambda: all_in_sync(first, "backlog"), "every replica in sync")
    third.kill()
    body = b"x" * 1024
    publish_batches(first, "backlog", 20_000, "x" * 1024)  # ~20 MiB the follower misses
    wait_for(lambda: "n3" not in view(first, "backlog")["in_sync"], "n3 out of sync", 15.0)
    before = rss_bytes(first)
    third.start()
    # publishing goes on, confirmed, while n3 copies the backlog
    connection = first.amqp()
    channel = connection.channel()
    channel.confirm_delivery()
    confirmed_during_catch_up = 0
    deadline = time.monotonic() + 60.0
    while not all_in_sync(first, "backlog"):
        assert time.monotonic() < deadline, "n3 did not catch up within 60 s"
        for _ in range(50):
            channel.basic_publish("", "backlog", body, pika.BasicProperties(delivery_mode=2))
            confirmed_during_catch_up += 1
    connection.close()
    growth = rss_bytes(first) - before
    print(f"catch-up: {confirmed_during_catch_up} publishes confirmed meanwhile, "
          f"leader RSS grew {growth / 2**20:.1f} MiB")
    assert confirmed_during_catch_up > 0
    assert growth < 15 * 2**20, f"the leader grew {growth / 2**20:.1f} MiB"
    wait_for(lambda: view(first, "backlog")["replica_lag"] == {"n2": 0, "n3": 0},
             "both followers to hold everything")


def test_a_nodes_policy_change_moves_the_replicas_and_the_leader(cluster: list[Node]) -> None:
    first, second, _ = cluster

    def policy(nodes: list[str]) -> None:
        reply = httpx.put(f"{first.url}/api/policies/%2F/pinned", json={
            "pattern": "^pinned$", "apply-to": "queues", "priority": 5,
            "definition": {"ha-mode": "nodes", "ha-params": nodes}}, auth=AUTH)
        assert reply.status_code in (201, 204), reply.text

    policy(["n1", "n2"])
    connection = first.amqp()
    connection.channel().queue_declare("pinned", durable=True)
    connection.close()
    assert sorted(view(first, "pinned")["members"]) == ["n1", "n2"]
    bodies = [f"p{i}".encode() for i in range(100)]
    publish_confirmed(first, "pinned", bodies)
    policy(["n2", "n3"])

    def moved() -> bool:
        described = view(second, "pinned")
        return (sorted(described["members"]) == ["n2", "n3"]
                and sorted(described["in_sync"]) == ["n2", "n3"])
    wait_for(moved, "the replicas to move to n2 and n3", 30.0)
    leader = view(second, "pinned")["leader"]
    assert leader in ("n2", "n3")
    got = drain(second, "pinned")
    assert sorted(body for body, _ in got) == sorted(bodies)
