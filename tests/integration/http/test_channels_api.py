"""Channels, connection rates and closing a connection with a reason, through the HTTP
API of a running `logbroker serve`, as a real pika client sees them."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any
from urllib.parse import quote

import httpx
import pika
import pytest
from pika.exceptions import ConnectionClosedByBroker
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.integration.conftest import BrokerProcess, wait_for


def amqp_connection(broker: BrokerProcess) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=broker.amqp_port,
        credentials=pika.PlainCredentials("guest", "guest"),
        socket_timeout=5, blocked_connection_timeout=5, connection_attempts=1))


def amqp_connections(http: httpx.Client) -> list[dict[str, Any]]:
    answer = http.get("/api/connections?data_rates_age=60&data_rates_incr=5")
    assert answer.status_code == 200, answer.text
    return [c for c in answer.json() if c["protocol"] == "AMQP 0-9-1"]


def test_channels_are_listed_with_rabbitmqs_fields(http: httpx.Client,
                                                   broker: BrokerProcess) -> None:
    assert http.put("/api/queues/%2F/ch-q", json={}).status_code in (201, 204)
    connection = amqp_connection(broker)
    try:
        first = connection.channel()
        first.confirm_delivery()
        first.basic_publish("", "ch-q", b"one")
        second = connection.channel()
        second.basic_qos(prefetch_count=7)
        method, _, _ = second.basic_get("ch-q")
        assert method is not None
        second.basic_ack(method.delivery_tag)
        second.tx_select()
        [listed] = wait_for(lambda: amqp_connections(http), "the connection to be listed")
        assert listed["recv_oct"] > 0 and listed["send_oct"] > 0
        assert set(listed["recv_oct_details"]) >= {"rate", "samples", "avg_rate"}
        channels = http.get(f"/api/connections/{quote(listed['name'], safe='')}/channels"
                            ).json()
        assert [c["number"] for c in channels] == [1, 2]
        one, two = channels
        assert one["confirm"] is True and one["transactional"] is False
        assert two["confirm"] is False and two["transactional"] is True
        assert two["prefetch_count"] == 7 and one["prefetch_count"] == 0
        assert one["connection_details"]["name"] == listed["name"]
        assert one["user"] == "guest" and one["vhost"] == "/" and one["state"] == "running"
        assert one["messages_unacknowledged"] == 0
        assert (one["message_stats"]["publish"], one["message_stats"]["confirm"]) == (1, 1)
        assert (two["message_stats"]["get"], two["message_stats"]["ack"]) == (1, 1)
        assert two["message_stats"]["deliver_get_details"] == {"rate": 0.0}
        assert "Pika" in listed["client_properties"]["product"]
        assert listed["frame_max"] > 0 and listed["timeout"] >= 0
        everywhere = [c for c in http.get("/api/channels").json()
                      if c["connection_details"]["name"] == listed["name"]]
        assert [c["name"] for c in everywhere] == [c["name"] for c in channels]
        sampled = http.get("/api/channels?msg_rates_age=60&msg_rates_incr=5").json()
        assert all("samples" in c["message_stats"]["publish_details"] for c in sampled)
        assert http.get("/api/vhosts/%2F/channels").status_code == 200
        stats = http.get("/api/overview").json()["message_stats"]
        assert stats["publish"] >= 1 and stats["confirm"] >= 1
    finally:
        connection.close()


def test_an_operator_closes_a_connection_with_a_reason(http: httpx.Client,
                                                       broker: BrokerProcess) -> None:
    connection = amqp_connection(broker)
    [listed] = wait_for(lambda: amqp_connections(http), "the connection to be listed")
    name = quote(listed["name"], safe="")
    answer = http.delete(f"/api/connections/{name}", headers={"X-Reason": "maintenance"})
    assert answer.status_code == 204, answer.text
    deadline = time.monotonic() + 5
    with pytest.raises(ConnectionClosedByBroker) as closed:
        while time.monotonic() < deadline:
            connection.process_data_events(time_limit=0.1)
    assert closed.value.reply_code == 320
    assert closed.value.reply_text == "CONNECTION_FORCED - maintenance"
    wait_for(lambda: not amqp_connections(http), "the closed connection to leave the list")
    assert http.delete(f"/api/connections/{name}").status_code == 404


def test_a_user_closes_only_its_own_connections(http: httpx.Client,
                                                broker: BrokerProcess) -> None:
    assert http.put("/api/users/watcher", json={"password": "pw", "tags": "monitoring"}
                    ).status_code in (201, 204)
    connection = amqp_connection(broker)
    try:
        [listed] = wait_for(lambda: amqp_connections(http), "the connection to be listed")
        name = quote(listed["name"], safe="")
        answer = http.delete(f"/api/connections/{name}", auth=("watcher", "pw"))
        assert answer.status_code == 403, answer.text
        assert http.get("/api/connections/nowhere").status_code == 404
    finally:
        connection.close()


def test_the_node_samples_from_its_start(http: httpx.Client) -> None:
    """The sampling timer runs in `logbroker serve`: the node's series has samples."""
    def sampled() -> list[dict[str, int]] | None:
        overview = http.get("/api/overview?msg_rates_age=60&msg_rates_incr=5").json()
        return overview["message_stats"]["publish_details"]["samples"] or None
    samples = wait_for(sampled, "a first sample", 10.0)
    assert all(s["timestamp"] % 5000 == 0 for s in samples)


async def test_an_operator_closes_a_websocket_with_a_reason(http: httpx.Client,
                                                            broker: BrokerProcess) -> None:
    headers = {"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()}
    async with connect(f"{broker.ws_url}?vhost=%2F", additional_headers=headers,
                       open_timeout=5, close_timeout=2) as ws:
        def listed() -> list[dict[str, Any]]:
            return [c for c in http.get("/api/connections").json()
                    if c["protocol"] == "WebSocket"]
        [connection] = wait_for(listed, "the WebSocket to be listed")
        answer = http.delete(f"/api/connections/{quote(connection['name'], safe='')}",
                             headers={"X-Reason": "maintenance"})
        assert answer.status_code == 204, answer.text
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 5)
        assert closed.value.rcvd is not None
        assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4320, "maintenance")
    wait_for(lambda: not listed(), "the closed WebSocket to leave the list")
