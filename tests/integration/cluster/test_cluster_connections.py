"""Connections and channels of every member through any member's API: a pika client on
one node is listed, with its channel, by another (and counted in its overview), which
closes it with a reason the client gets as 320 CONNECTION_FORCED (the close forwarded
to the node holding it)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pika
import pytest
from pika.exceptions import ConnectionClosedByBroker

from tests.integration.cluster.cluster_nodes import Node, running_cluster
from tests.integration.conftest import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
AUTH = ("guest", "guest")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Node]]:
    with running_cluster(tmp_path_factory.mktemp("connections")) as nodes:
        yield nodes


def get(node: Node, path: str) -> Any:
    reply = httpx.get(f"{node.url}{path}", auth=AUTH, timeout=10.0)
    assert reply.status_code == 200, reply.text
    return reply.json()


def named(node: Node, path: str, client_name: str) -> list[dict[str, Any]]:
    return [c for c in get(node, path)
            if c.get("client_properties", {}).get("connection_name") == client_name]


def test_another_member_lists_and_closes_a_connection(cluster: list[Node]) -> None:
    holder, asker = cluster[0], cluster[1]
    connection = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", holder.amqp_port, credentials=pika.PlainCredentials(*AUTH),
        client_properties={"connection_name": "held-on-n1"}, socket_timeout=5,
        connection_attempts=1))
    try:
        channel = connection.channel()
        channel.basic_qos(prefetch_count=3)
        [listed] = wait_for(lambda: named(asker, "/api/connections", "held-on-n1"),
                            "the connection listed by another member")
        assert listed["node"] == holder.name and listed["channels"] == 1
        name = quote(listed["name"], safe="")
        assert get(asker, f"/api/connections/{name}")["node"] == holder.name
        channels = [c for c in get(asker, "/api/channels")
                    if c["connection_details"]["name"] == listed["name"]]
        assert [(c["node"], c["prefetch_count"], c["state"]) for c in channels] == [
            (holder.name, 3, "running")]
        assert get(asker, f"/api/connections/{name}/channels") == channels
        totals = get(asker, "/api/overview")["object_totals"]
        assert totals["connections"] >= 1 and totals["channels"] >= 1  # held by n1 only
        sampled = get(asker, "/api/connections?data_rates_age=60&data_rates_incr=5")
        [mine] = [c for c in sampled if c["name"] == listed["name"]]
        assert "samples" in mine["recv_oct_details"]
        answer = httpx.delete(f"{asker.url}/api/connections/{name}", auth=AUTH, timeout=10.0,
                              headers={"X-Reason": "moved elsewhere"})
        assert answer.status_code == 204, answer.text
        deadline = time.monotonic() + 5
        with pytest.raises(ConnectionClosedByBroker) as closed:
            while time.monotonic() < deadline:
                connection.process_data_events(time_limit=0.1)
        assert (closed.value.reply_code, closed.value.reply_text) == (
            320, "CONNECTION_FORCED - moved elsewhere")
        wait_for(lambda: not named(asker, "/api/connections", "held-on-n1"),
                 "the closed connection gone from every listing")
        missing = httpx.get(f"{asker.url}/api/connections/{name}", auth=AUTH, timeout=10.0)
        assert missing.status_code == 404
    finally:
        if connection.is_open:
            connection.close()
