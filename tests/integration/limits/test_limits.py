"""Limits a hostile or broken client cannot pass: vhost limits over HTTP, the node's
connection limit, and the message size, against a real broker with pika and httpx."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pika
import pytest

from tests.integration.conftest import BrokerProcess, start_broker


def connect(broker: BrokerProcess) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", broker.amqp_port))


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=broker.url, auth=("guest", "guest"), timeout=10) as client:
        yield client
        client.delete("/api/vhost-limits/%2F/max-connections")
        client.delete("/api/vhost-limits/%2F/max-queues")


def test_vhost_max_connections_refuses_the_next_connection_with_530(
        broker: BrokerProcess, admin: httpx.Client) -> None:
    assert admin.put("/api/vhost-limits/%2F/max-connections",
                     json={"value": 1}).status_code == 204
    assert admin.get("/api/vhost-limits").json() == [
        {"vhost": "/", "value": {"max-connections": 1}}]
    with connect(broker):
        # pika reports a close before open-ok as a probable access refusal, with the text
        with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as refused:
            connect(broker)
        assert "(530)" in str(refused.value)
        assert ("NOT_ALLOWED - connection refused: connection limit (1) is reached for "
                "vhost '/'") in str(refused.value)
    assert admin.delete("/api/vhost-limits/%2F/max-connections").status_code == 204
    with connect(broker), connect(broker):
        pass


def test_vhost_max_queues_refuses_a_declare_with_406(
        broker: BrokerProcess, admin: httpx.Client) -> None:
    with connect(broker) as connection:
        channel = connection.channel()
        channel.queue_declare("limited-1")
        existing = len([q for q in admin.get("/api/queues/%2F").json()])
        assert admin.put("/api/vhost-limits/%2F/max-queues",
                         json={"value": existing}).status_code == 204
        channel.queue_declare("limited-1")  # redeclaring is fine
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
            channel.queue_declare("limited-2")
        assert refused.value.reply_code == 406
        assert "queue limit in vhost '/'" in refused.value.reply_text
    over_http = admin.put("/api/queues/%2F/limited-3", json={"durable": True})
    assert over_http.status_code == 400 and "queue limit" in over_http.text


def test_parameters_api_validates_and_lists(admin: httpx.Client) -> None:
    assert admin.put("/api/parameters/vhost-limits/%2F/limits",
                     json={"value": {"max-queues": 100}}).status_code == 201
    assert admin.get("/api/parameters/vhost-limits/%2F/limits").json() == {
        "vhost": "/", "component": "vhost-limits", "name": "limits",
        "value": {"max-queues": 100}}
    assert admin.put("/api/parameters/vhost-limits/%2F/limits",
                     json={"value": {"max-queues": "many"}}).status_code == 400
    assert admin.put("/api/parameters/nothing-here/%2F/x",
                     json={"value": {}}).status_code == 404
    assert admin.put("/api/vhost-limits/%2F/max-channels",
                     json={"value": 1}).status_code == 400
    assert admin.delete("/api/parameters/vhost-limits/%2F/limits").status_code == 204
    assert admin.get("/api/parameters").json() == []


def test_the_node_connection_limit(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data", "--max-connections", "2")
    try:
        with connect(broker), connect(broker):
            with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as refused:
                connect(broker)
            assert "(530)" in str(refused.value)
            assert ("NOT_ALLOWED - connection refused: node connection limit (2) is "
                    "reached") in str(refused.value)
        with connect(broker):
            pass
        assert broker.log().count("node connection limit (2) is reached") == 1
    finally:
        broker.stop()


def test_a_message_over_the_size_limit_is_406(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data", "--max-message-bytes", "4096")
    try:
        with connect(broker) as connection:
            channel = connection.channel()
            channel.queue_declare("sized")
            channel.confirm_delivery()
            channel.basic_publish("", "sized", b"x" * 4096)
            with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
                channel.basic_publish("", "sized", b"x" * 4097)
            assert refused.value.reply_code == 406
    finally:
        broker.stop()


def test_the_cli_sets_lists_and_clears_parameters(broker: BrokerProcess) -> None:
    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "logbroker", "--url",
                               f"http://guest:guest@127.0.0.1:{broker.http_port}", *argv],
                              capture_output=True, text=True, timeout=60)

    assert cli("set-vhost-limits", '{"max-queues": 500}').returncode == 0
    listed = cli("list", "parameters")
    assert listed.returncode == 0 and "vhost-limits" in listed.stdout, listed.stderr
    assert "max-queues" in listed.stdout
    refused = cli("set-parameter", "vhost-limits", "limits", '{"max-queues": "x"}')
    assert refused.returncode == 1 and "must be an integer" in refused.stderr
    unknown = cli("set-parameter", "no-such-component", "x", "{}")
    assert unknown.returncode == 1 and "no-such-component" in unknown.stderr
    assert cli("clear-vhost-limits").returncode == 0
    assert "vhost-limits" not in cli("list", "parameters").stdout
