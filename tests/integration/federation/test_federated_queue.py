"""Federated queues between real brokers: messages move to where consumers wait, and only
then; a basic.get does not pull."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiormq
import httpx
import pika
import pytest
from pamqp.commands import Basic

from tests.integration.conftest import BrokerProcess, start_broker, wait_for

pytestmark = pytest.mark.slow
GUEST = ("guest", "guest")


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[dict[str, BrokerProcess]]:
    started = {name: start_broker(tmp_path / name, "--node-name", f"fq-{name}")
               for name in ("a", "b")}
    try:
        yield started
    finally:
        for broker in started.values():
            broker.stop()


def federate_queue(downstream: BrokerProcess, upstream: BrokerProcess,
                   **settings: object) -> None:
    with httpx.Client(base_url=downstream.url, auth=GUEST, timeout=10) as http:
        uri = f"amqp://guest:guest@127.0.0.1:{upstream.amqp_port}/%2F"
        assert http.put("/api/parameters/federation-upstream/%2F/up",
                        json={"value": {"uri": uri, **settings}}).status_code == 201
        http.put("/api/queues/%2F/work", json={"durable": True})
        assert http.put("/api/policies/%2F/fq", json={
            "pattern": "^work$", "apply-to": "queues",
            "definition": {"federation-upstream": "up"}}).status_code == 201
        wait_for(lambda: [(x["queue"], x["status"]) for x in
                          http.get("/api/federation-links").json()] == [("work", "running")],
                 "the queue link to run", 20)


def depth(broker: BrokerProcess) -> int:
    return int(httpx.get(f"{broker.url}/api/queues/%2F/work", auth=GUEST).json()["messages"])


def publish(broker: BrokerProcess, count: int, prefix: str = "w") -> None:
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", broker.amqp_port)) as c:
        channel = c.channel()
        channel.queue_declare("work", durable=True)
        channel.confirm_delivery()
        for index in range(count):
            channel.basic_publish("", "work", f"{prefix}{index}".encode(),
                                  pika.BasicProperties(delivery_mode=2))


def publish_many(broker: BrokerProcess, count: int) -> None:
    """`publish`, with up to `WINDOW` confirms awaited at once (pika waits for each)."""
    asyncio.run(_publish_many(broker.amqp_port, count))


WINDOW = 500


async def _publish_many(port: int, count: int) -> None:
    connection = await aiormq.connect(f"amqp://guest:guest@127.0.0.1:{port}/")
    try:
        channel = await connection.channel(publisher_confirms=True)
        await channel.queue_declare("work", durable=True)
        persistent = aiormq.spec.Basic.Properties(delivery_mode=2)
        for start in range(0, count, WINDOW):
            confirms = await asyncio.gather(*(
                channel.basic_publish(f"w{index}".encode(), routing_key="work",
                                      properties=persistent)
                for index in range(start, min(count, start + WINDOW))))
            assert all(isinstance(confirm, Basic.Ack) for confirm in confirms)
    finally:
        await connection.close()


def test_messages_move_only_to_where_consumers_wait(pair: dict[str, BrokerProcess]) -> None:
    a, b = pair["a"], pair["b"]
    publish(a, 100)
    federate_queue(b, a)
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", b.amqp_port)) as c:
        channel = c.channel()
        assert channel.basic_get("work")[0] is None  # a basic.get makes no demand
        time.sleep(1)
        assert (depth(a), depth(b)) == (100, 0)  # no consumer downstream: nothing moves
        channel.basic_qos(prefetch_count=10)
        bodies: list[bytes] = []
        for method, _properties, body in channel.consume("work", inactivity_timeout=10):
            if method is None:
                break
            bodies.append(body)
            channel.basic_ack(method.delivery_tag)
            if len(bodies) == 100:
                break
        channel.cancel()
    assert sorted(bodies) == sorted(f"w{index}".encode() for index in range(100))
    wait_for(lambda: depth(a) == 0, "the upstream queue to be empty (moved, not copied)", 10)
    with httpx.Client(base_url=b.url, auth=GUEST) as http:
        [link] = http.get("/api/federation-links").json()
    assert link["type"] == "queue" and link["messages"] == 100


def test_a_local_backlog_is_served_before_anything_moves(pair: dict[str, BrokerProcess]) -> None:
    a, b = pair["a"], pair["b"]
    publish(a, 20)
    publish(b, 5, prefix="own")
    federate_queue(b, a)
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", b.amqp_port)) as c:
        channel = c.channel()
        channel.basic_qos(prefetch_count=1)
        first = []
        for method, _properties, body in channel.consume("work", inactivity_timeout=10):
            assert method is not None
            first.append(body)
            channel.basic_ack(method.delivery_tag)
            if len(first) == 5:
                break
        channel.cancel()
    assert sorted(first) == sorted(f"own{index}".encode() for index in range(5))
    assert depth(a) >= 15  # a few may have moved once b's backlog ran out, not before


class Consumer(threading.Thread):
    """Consumes `work` on a broker with acks, reconnecting (bounded in time) when the broker
    goes away; records each delivery's body and whether it was flagged redelivered (by
    the AMQP flag, or by the link in `x-received-from`)."""

    def __init__(self, amqp_port: int, deadline_s: float) -> None:
        super().__init__(daemon=True)
        self.port, self.deadline = amqp_port, time.monotonic() + deadline_s
        self.got: list[tuple[bytes, bool]] = []
        self.wanted: set[bytes] = set()

    def run(self) -> None:
        while time.monotonic() < self.deadline and not self.wanted <= self.bodies():
            try:
                with pika.BlockingConnection(pika.ConnectionParameters(
                        "127.0.0.1", self.port, connection_attempts=1)) as connection:
                    channel = connection.channel()
                    channel.basic_qos(prefetch_count=500)
                    for method, properties, body in channel.consume("work",
                                                                    inactivity_timeout=1):
                        if method is not None:
                            self.got.append((body, self._flagged(method, properties)))
                            channel.basic_ack(method.delivery_tag)
                        if time.monotonic() > self.deadline or self.wanted <= self.bodies():
                            return
            except (pika.exceptions.AMQPError, ConnectionError):
                time.sleep(0.2)

    @staticmethod
    def _flagged(method: Any, properties: Any) -> bool:
        received = (properties.headers or {}).get("x-received-from") or [{}]
        return bool(method.redelivered or received[-1].get("redelivered"))

    def bodies(self) -> set[bytes]:
        return {body for body, _ in self.got}


@pytest.mark.parametrize("victim", ["a", "b"])
def test_on_confirm_loses_nothing_when_either_side_is_killed(
        pair: dict[str, BrokerProcess], victim: str) -> None:
    count = 10_000
    publish_many(pair["a"], count)
    federate_queue(pair["b"], pair["a"], **{"ack-mode": "on-confirm", "prefetch-count": 500})
    consumer = Consumer(pair["b"].amqp_port, deadline_s=90)
    consumer.wanted = {f"w{index}".encode() for index in range(count)}
    consumer.start()
    wait_for(lambda: len(consumer.got) > count // 3, "a third moved and consumed", 60)
    broker = pair[victim]
    broker.process.send_signal(signal.SIGKILL)
    broker.process.wait(10)
    pair[victim] = start_broker(broker.data_dir, "--node-name", f"fq-{victim}",
                                amqp_port=broker.amqp_port, http_port=broker.http_port)
    consumer.join(100)
    assert consumer.bodies() == consumer.wanted  # every message arrived
    seen: set[bytes] = set()
    for body, flagged in consumer.got:
        assert body not in seen or flagged, body  # a second copy says it came again
        seen.add(body)
    wait_for(lambda: depth(pair["a"]) == 0, "the upstream queue to be empty", 20)


def test_a_queue_link_clears_user_id_unless_trusted(pair: dict[str, BrokerProcess]) -> None:
    a, b = pair["a"], pair["b"]
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", a.amqp_port)) as c:
        channel = c.channel()
        channel.queue_declare("work", durable=True)
        channel.confirm_delivery()
        channel.basic_publish("", "work", b"signed", pika.BasicProperties(
            delivery_mode=2, user_id="guest"))
    federate_queue(b, a)  # trust-user-id: false, RabbitMQ's default
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", b.amqp_port)) as c:
        channel = c.channel()
        method, properties, body = next(channel.consume("work", inactivity_timeout=10))
        assert method is not None, "nothing moved"
        channel.basic_ack(method.delivery_tag)
        channel.cancel()
    assert body == b"signed" and properties.user_id is None
    assert properties.headers["x-received-from"][0]["queue"] == "work"
