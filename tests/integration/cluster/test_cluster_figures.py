"""Cluster-wide figures on every node of a real 3-node cluster: each node's
/api/queues, /api/queues/{vhost}/{name}, /api/overview and /api/nodes show the
leader's real counts (unacked too), members, the in-sync set and each follower's
lag, and /api/exchanges what every node counted; queue actions work through any
node; the queues of a node that is paused (SIGSTOP) or killed (SIGKILL) are shown
unknown without hanging the page.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pika
import pytest

from tests.integration.cluster.cluster_nodes import Node, running_cluster
from tests.integration.conftest import wait_for

AUTH = ("guest", "guest")
REPLICATED = {"x-queue-replicas": 3, "x-queue-leader-locator": "client-local"}
SINGLE = {"x-queue-replicas": 1, "x-queue-leader-locator": "client-local"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Node]]:
    with running_cluster(tmp_path_factory.mktemp("figures")) as nodes:
        yield nodes


def get(node: Node, path: str) -> Any:
    # The timeout is a hang detector, far above the figures' own 2 s limit.
    answer = httpx.get(f"{node.url}{path}", auth=AUTH, timeout=15.0)
    assert answer.status_code == 200, answer.text
    return answer.json()


def listed(node: Node, name: str) -> dict[str, Any]:
    return next(q for q in get(node, "/api/queues") if q["name"] == name)


def publish(node: Node, queue: str, count: int, arguments: dict[str, Any]) -> None:
    connection = node.amqp()
    channel = connection.channel()
    channel.queue_declare(queue, durable=True, arguments=arguments)
    channel.confirm_delivery()
    for i in range(count):
        channel.basic_publish("", queue, f"m{i}".encode(), pika.BasicProperties(delivery_mode=2))
    connection.close()


def test_every_node_shows_the_leaders_ready_and_unacked_counts(cluster: list[Node]) -> None:
    publish(cluster[0], "fig-q", 10, REPLICATED)  # led by n1, followed by n2 and n3
    holder = cluster[1].amqp()  # takes 3 through another node, unacked
    channel = holder.channel()
    taken = [channel.basic_get("fig-q") for _ in range(3)]
    assert all(method is not None for method, _, _ in taken)
    try:
        for node in cluster:
            def settled(node: Node = node) -> dict[str, Any] | None:
                view = get(node, "/api/queues/%2F/fig-q")
                return view if view["messages_unacknowledged"] == 3 else None
            one = wait_for(settled, f"the unacked count on {node.name}")
            for view in (one, listed(node, "fig-q")):
                assert view["leader"] == view["node"] == "n1", node.name
                assert (view["messages_ready"], view["messages_unacknowledged"],
                        view["messages"]) == (7, 3, 10), (node.name, view)
                assert view["members"] == ["n1", "n2", "n3"]
                assert sorted(view["online"]) == ["n1", "n2", "n3"]
                assert [f["node"] for f in view["followers"]] == ["n2", "n3"]
                assert all(isinstance(f["lag"], int) for f in view["followers"]), view
                assert view["message_stats"]["publish"] == 10
                assert view["message_stats"]["get"] == 3
            totals = get(node, "/api/overview")["queue_totals"]
            assert totals["messages_unacknowledged"] >= 3 and totals["messages_ready"] >= 7
        # `logbroker list queues` through a node that does not lead it (was blank)
        cli = subprocess.run([sys.executable, "-m", "logbroker", "--url", cluster[2].url,
                              "list", "queues", "--format", "json"], capture_output=True,
                             timeout=60, check=True, env={k: v for k, v in os.environ.items()
                                                          if k != "LOGBROKER_URL"})
        row = next(q for q in json.loads(cli.stdout) if q["name"] == "fig-q")
        assert (row["messages_ready"], row["messages_unacknowledged"]) == (7, 3), row
    finally:
        holder.close()


def test_every_node_adds_up_what_every_node_counted_of_an_exchange(
        cluster: list[Node]) -> None:
    """Each node counts the publishes it takes; any node's exchange views add them up."""
    for node, count in ((cluster[0], 4), (cluster[1], 3)):
        connection = node.amqp()
        channel = connection.channel()
        channel.confirm_delivery()
        for _ in range(count):
            channel.basic_publish("amq.fanout", "", b"counted")
        connection.close()
    for node in cluster:
        one = get(node, "/api/exchanges/%2F/amq.fanout?msg_rates_age=60&msg_rates_incr=5")
        assert one["message_stats"]["publish_in"] == 7, node.name
        assert "samples" in one["message_stats"]["publish_in_details"]
        [listed] = [x for x in get(node, "/api/exchanges") if x["name"] == "amq.fanout"]
        assert listed["message_stats"]["publish_in"] == 7, node.name


def test_queue_actions_work_through_a_node_that_does_not_lead_the_queue(
        cluster: list[Node]) -> None:
    for via, target in ((cluster[2], "n2"), (cluster[1], "n1")):
        answer = httpx.post(f"{via.url}/api/queues/%2F/fig-q/actions", auth=AUTH, timeout=30.0,
                            json={"action": "transfer_leader", "node": target})
        assert answer.status_code == 200 and answer.json() == {"leader": target}, answer.text
        for node in cluster:
            def moved(node: Node = node, target: str = target) -> dict[str, Any] | None:
                view = get(node, "/api/queues/%2F/fig-q")
                return view if view["leader"] == target and view["messages_ready"] == 10 \
                    else None
            view = wait_for(moved, f"{node.name} to show {target} leading fig-q", 15.0)
            assert view["messages_unacknowledged"] == 0
    for action in ("sync", "cancel_sync"):
        answer = httpx.post(f"{cluster[2].url}/api/queues/%2F/fig-q/actions", auth=AUTH,
                            timeout=30.0, json={"action": action})
        assert answer.status_code == 204, answer.text


def test_every_node_lists_every_nodes_role_controller_and_alarms(cluster: list[Node]) -> None:
    for node in cluster:
        nodes = get(node, "/api/nodes")
        assert [n["name"] for n in nodes] == ["n1", "n2", "n3"]
        assert sum(n["controller"] for n in nodes) == 1
        assert all(n["mem_alarm"] is False and n["disk_free_alarm"] is False for n in nodes)
        assert all(n["role"] == "voter" and n["status"] == "up" for n in nodes)
        assert all(isinstance(n["queue_leaders"], int) for n in nodes)


def test_a_silent_nodes_queues_are_shown_unknown_and_then_known_again(
        cluster: list[Node]) -> None:
    publish(cluster[1], "fig-n2", 2, SINGLE)  # led by n2, no other copy
    wait_for(lambda: listed(cluster[0], "fig-n2")["messages_ready"] == 2,
             "n1 to show n2's queue")
    cluster[1].pause()  # connected but silent: its answer never comes in time
    try:
        view = get(cluster[0], "/api/queues/%2F/fig-n2")
        assert view["messages_ready"] is None and view["state"] == "down", view
        assert listed(cluster[0], "fig-q")["messages_ready"] is not None
    finally:
        cluster[1].resume()
    wait_for(lambda: listed(cluster[0], "fig-n2")["messages_ready"] == 2,
             "n2's figures again", 15.0)


def test_a_killed_nodes_queues_are_shown_unknown_without_hanging(cluster: list[Node]) -> None:
    publish(cluster[2], "fig-n3", 4, SINGLE)  # led by n3, no other copy
    wait_for(lambda: listed(cluster[0], "fig-n3")["messages_ready"] == 4,
             "n1 to show n3's queue")
    cluster[2].kill()
    for node in cluster[:2]:
        view = get(node, "/api/queues/%2F/fig-n3")
        assert view["leader"] == "n3" and view["state"] == "down", view
        assert view["messages_ready"] is None and view["messages_unacknowledged"] is None
        assert listed(node, "fig-n3")["messages_ready"] is None
        assert listed(node, "fig-q")["messages_ready"] is not None  # the others still shown
        overview = get(node, "/api/overview")
        assert overview["queues_unknown"] >= 1
        wait_for(lambda node=node: next(n for n in get(node, "/api/nodes")
                                        if n["name"] == "n3")["status"] == "down",
                 f"{node.name} to see n3 down", 15.0)
