"""Federated exchanges between real brokers on 127.0.0.1: links, bindings kept in step,
x-received-from, and max-hops in a mesh of three."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pika
import pytest

from tests.integration.conftest import BrokerProcess, start_broker, wait_for

pytestmark = pytest.mark.slow
GUEST = ("guest", "guest")


def admin(broker: BrokerProcess) -> httpx.Client:
    return httpx.Client(base_url=broker.url, auth=GUEST, timeout=10)


def uri(broker: BrokerProcess) -> str:
    return f"amqp://guest:guest@127.0.0.1:{broker.amqp_port}/%2F"


def federate(downstream: BrokerProcess, upstreams: dict[str, BrokerProcess],
             **settings: Any) -> None:
    with admin(downstream) as http:
        for name, upstream in upstreams.items():
            reply = http.put(f"/api/parameters/federation-upstream/%2F/{name}",
                             json={"value": {"uri": uri(upstream), **settings}})
            assert reply.status_code in (201, 204), reply.text
        assert http.put("/api/exchanges/%2F/fed-x", json={"type": "topic"}).status_code < 300
        reply = http.put("/api/policies/%2F/federate", json={
            "pattern": "^fed-", "apply-to": "exchanges",
            "definition": {"federation-upstream-set": "all"}})
        assert reply.status_code in (201, 204), reply.text


def links_running(broker: BrokerProcess, count: int) -> bool:
    with admin(broker) as http:
        links = http.get("/api/federation-links").json()
    return len(links) == count and all(link["status"] == "running" for link in links)


def bind(broker: BrokerProcess, queue: str, key: str) -> None:
    with admin(broker) as http:
        http.put(f"/api/queues/%2F/{queue}", json={"durable": True})
        assert http.post(f"/api/bindings/%2F/e/fed-x/q/{queue}",
                         json={"routing_key": key}).status_code == 201


def publish(broker: BrokerProcess, key: str, body: bytes) -> None:
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", broker.amqp_port)) as c:
        channel = c.channel()
        channel.exchange_declare("fed-x", "topic", passive=True)
        channel.confirm_delivery()
        channel.basic_publish("fed-x", key, body, pika.BasicProperties(delivery_mode=2))


def drain(broker: BrokerProcess, queue: str) -> list[tuple[bytes, Any]]:
    got = []
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", broker.amqp_port)) as c:
        channel = c.channel()
        while (message := channel.basic_get(queue, auto_ack=True))[0] is not None:
            got.append((message[2], (message[1].headers or {}).get("x-received-from")))
    return got


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[dict[str, BrokerProcess]]:
    started: dict[str, BrokerProcess] = {}
    try:
        for name in ("a", "b", "c"):
            started[name] = start_broker(tmp_path / name, "--node-name", f"broker-{name}")
        yield started
    finally:
        for broker in started.values():
            broker.stop()


def test_a_federated_exchange_follows_its_bindings(brokers: dict[str, BrokerProcess]) -> None:
    a, b = brokers["a"], brokers["b"]
    federate(b, {"up-a": a})
    bind(b, "fed-q", "a.*")
    wait_for(lambda: links_running(b, 1), "the link to run", 20)
    publish(a, "a.one", b"first")
    wait_for(lambda: len(drained := drain(b, "fed-q")) == 1 and drained, "the message", 10)
    assert _upstream_keys(a) == {"a.*"}  # the link's queue upstream: the downstream's binding
    bind(b, "fed-q", "b.#")
    with admin(b) as http:
        assert http.delete("/api/bindings/%2F/e/fed-x/q/fed-q/a.*").status_code == 204
    wait_for(lambda: _upstream_keys(a) == {"b.#"}, "the bindings to follow", 10)
    publish(a, "a.two", b"not wanted any more")
    publish(a, "b.x.y", b"second")
    got = wait_for(lambda: drain(b, "fed-q"), "the second message", 10)
    assert [body for body, _ in got] == [b"second"]
    [(_, received)] = got
    assert received[0]["exchange"] == "fed-x" and received[0]["cluster-name"] == "broker-a"
    assert "guest:***@" in received[0]["uri"]
    status = subprocess.run(
        [sys.executable, "-m", "logbroker", "--url",
         f"http://guest:guest@127.0.0.1:{b.http_port}", "federation", "status"],
        capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    [row] = [line for line in status.stdout.splitlines() if "up-a" in line]
    assert "fed-x" in row and "running" in row
    with admin(b) as http:  # clearing the policy stops the link, live
        assert http.delete("/api/policies/%2F/federate").status_code == 204
    wait_for(lambda: admin(b).get("/api/federation-links").json() == [], "the link to stop", 10)


def _upstream_keys(broker: BrokerProcess) -> set[str]:
    with admin(broker) as http:
        return {x["routing_key"] for x in http.get("/api/bindings/%2F").json()
                if x["destination"] == "federation: fed-x to broker-b" and x["source"] == "fed-x"}


def test_a_mesh_of_three_with_max_hops_1_delivers_each_message_once_per_broker(
        brokers: dict[str, BrokerProcess]) -> None:
    for name, broker in brokers.items():
        federate(broker, {f"up-{other}": o for other, o in brokers.items() if other != name},
                 **{"max-hops": 1})
        bind(broker, "mesh-q", "#")
    for broker in brokers.values():
        wait_for(lambda broker=broker: links_running(broker, 2), "every link to run", 20)
    for name, broker in brokers.items():
        publish(broker, f"from.{name}", name.encode())
    time.sleep(2)  # what would loop has had time to
    for broker in brokers.values():
        bodies = sorted(body for body, _ in drain(broker, "mesh-q"))
        assert bodies == [b"a", b"b", b"c"], bodies


def test_bad_upstream_definitions_are_refused(brokers: dict[str, BrokerProcess]) -> None:
    with admin(brokers["a"]) as http:
        reply = http.put("/api/parameters/federation-upstream/%2F/bad",
                         json={"value": {"uri": "http://nowhere", "ack-mode": "on-confirm"}})
        assert reply.status_code == 400 and "amqp://" in reply.text
        reply = http.put("/api/parameters/federation-upstream/%2F/bad",
                         json={"value": {"uri": "amqp://h", "max-hops": "two"}})
        assert reply.status_code == 400 and "max-hops" in reply.text


def restart(broker: BrokerProcess, node_name: str) -> BrokerProcess:
    """The same node again: its data, name and ports."""
    return start_broker(broker.data_dir, "--node-name", node_name,
                        amqp_port=broker.amqp_port, http_port=broker.http_port)


class Publisher(threading.Thread):
    """Publishes `count` numbered persistent messages to fed-x on `broker` with confirms,
    reconnecting (bounded) when the broker goes away; records what was confirmed."""

    def __init__(self, broker: BrokerProcess, first: int, count: int) -> None:
        super().__init__(daemon=True)
        self.port, self.next, self.end = broker.amqp_port, first, first + count
        self.confirmed: set[bytes] = set()

    def run(self) -> None:
        deadline = time.monotonic() + 120
        while self.next < self.end and time.monotonic() < deadline:
            try:
                with pika.BlockingConnection(pika.ConnectionParameters(
                        "127.0.0.1", self.port, connection_attempts=1)) as connection:
                    channel = connection.channel()
                    channel.confirm_delivery()
                    while self.next < self.end:
                        body = f"m{self.next}".encode()
                        channel.basic_publish("fed-x", "k", body,
                                              pika.BasicProperties(delivery_mode=2))
                        self.confirmed.add(body)
                        self.next += 1
            except pika.exceptions.AMQPError:
                self.next += 1  # that one may or may not be there: not counted
                time.sleep(0.2)


def test_on_confirm_loses_nothing_when_either_side_is_killed(
        brokers: dict[str, BrokerProcess]) -> None:
    a, b = brokers["a"], brokers["b"]
    federate(b, {"up-a": a}, **{"ack-mode": "on-confirm", "prefetch-count": 200})
    bind(b, "fed-q", "#")
    wait_for(lambda: links_running(b, 1), "the link to run", 20)
    confirmed: set[bytes] = set()
    for victim, first in (("a", 0), ("b", 10_000)):
        publisher = Publisher(brokers["a"], first, 10_000)
        publisher.start()
        wait_for(lambda p=publisher, f=first: p.next > f + 3_000, "a third published", 60)
        brokers[victim].process.send_signal(signal.SIGKILL)
        brokers[victim].process.wait(10)
        time.sleep(1)
        brokers[victim] = restart(brokers[victim], f"broker-{victim}")
        publisher.join(150)
        assert not publisher.is_alive()
        confirmed |= publisher.confirmed
    arrived: dict[bytes, list[Any]] = {}
    b = brokers["b"]

    def all_arrived() -> bool:
        for body, received in drain(b, "fed-q"):
            arrived.setdefault(body, []).append(received)
        return confirmed <= arrived.keys()

    wait_for(all_arrived, "every confirmed message downstream", 120)
    assert len(confirmed) >= 19_000
    for body, copies in arrived.items():
        assert body.startswith(b"m"), body
        for again in copies[1:]:  # a copy after the first came again from the upstream
            assert again[-1]["redelivered"] is True, (body, copies)


def _user_ids(broker: BrokerProcess, queue: str) -> list[tuple[bytes, str | None]]:
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", broker.amqp_port)) as c:
        channel = c.channel()
        got = []
        while (message := channel.basic_get(queue, auto_ack=True))[0] is not None:
            got.append((message[2], message[1].user_id))
        return got


def test_user_id_crosses_only_when_the_upstream_is_trusted(
        brokers: dict[str, BrokerProcess]) -> None:
    a, b = brokers["a"], brokers["b"]
    for trusted in (True, False):
        federate(b, {"up-a": a}, **{"trust-user-id": trusted})  # a change restarts the link
        bind(b, "fed-q", "#")
        wait_for(lambda: links_running(b, 1), "the link to run", 20)
        time.sleep(0.5)  # the restarted link's consumer is in place
        with pika.BlockingConnection(pika.ConnectionParameters(
                "127.0.0.1", a.amqp_port)) as connection:
            channel = connection.channel()
            channel.confirm_delivery()
            channel.basic_publish("fed-x", "k", f"trusted={trusted}".encode(),
                                  pika.BasicProperties(delivery_mode=2, user_id="guest"))
        got = wait_for(lambda: _user_ids(b, "fed-q"), "the message downstream", 10)
        # RabbitMQ's semantics: kept when trusted, cleared otherwise.
        assert got == [(f"trusted={trusted}".encode(), "guest" if trusted else None)]
