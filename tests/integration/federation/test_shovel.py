"""A dynamic shovel between real brokers: 10,000 messages moved while either side is
killed (-9) and restarted, nothing lost, src-delete-after honoured."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pika
import pytest

from tests.integration.conftest import BrokerProcess, start_broker, wait_for

pytestmark = pytest.mark.slow
GUEST = ("guest", "guest")
COUNT = 10_000


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[dict[str, BrokerProcess]]:
    started = {name: start_broker(tmp_path / name, "--node-name", f"shovel-{name}")
               for name in ("src", "dest")}
    try:
        yield started
    finally:
        for broker in started.values():
            broker.stop()


def restart(broker: BrokerProcess, name: str) -> BrokerProcess:
    broker.process.send_signal(signal.SIGKILL)
    broker.process.wait(10)
    time.sleep(0.5)
    return start_broker(broker.data_dir, "--node-name", f"shovel-{name}",
                        amqp_port=broker.amqp_port, http_port=broker.http_port)


def fill(broker: BrokerProcess, queue: str, count: int) -> None:
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", broker.amqp_port)) as c:
        channel = c.channel()
        channel.queue_declare(queue, durable=True)
        channel.confirm_delivery()
        for index in range(count):
            channel.basic_publish("", queue, f"m{index}".encode(),
                                  pika.BasicProperties(delivery_mode=2))


def drain(broker: BrokerProcess, queue: str) -> list[bytes]:
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", broker.amqp_port)) as c:
        channel = c.channel()
        bodies = []
        while (got := channel.basic_get(queue, auto_ack=True))[0] is not None:
            bodies.append(got[2])
        return bodies


def shovels(broker: BrokerProcess) -> list[dict[str, object]]:
    return list(httpx.get(f"{broker.url}/api/shovels", auth=GUEST, timeout=10).json())


def moved(broker: BrokerProcess) -> int:
    rows = shovels(broker)
    return int(rows[0]["messages"]) if rows else 0  # type: ignore[call-overload]


@pytest.mark.parametrize("victim", ["src", "dest"])
def test_a_shovel_moves_everything_through_a_kill_and_deletes_itself(
        pair: dict[str, BrokerProcess], victim: str) -> None:
    src, dest = pair["src"], pair["dest"]
    fill(src, "outbox", COUNT)
    value = {"src-uri": f"amqp://guest:guest@127.0.0.1:{src.amqp_port}", "src-queue": "outbox",
             "dest-uri": "amqp://", "dest-queue": "inbox", "src-delete-after": "queue-length",
             "ack-mode": "on-confirm", "src-prefetch-count": 100}
    with httpx.Client(base_url=dest.url, auth=GUEST, timeout=10) as http:
        assert http.put("/api/queues/%2F/inbox", json={"durable": True}).status_code < 300
        reply = http.put("/api/parameters/shovel/%2F/move-outbox", json={"value": value})
        assert reply.status_code == 201, reply.text
    wait_for(lambda: moved(dest) > 2_000, "a fifth moved", 60)
    pair[victim] = restart(pair[victim], victim)
    src, dest = pair["src"], pair["dest"]
    cli = subprocess.run([sys.executable, "-m", "logbroker", "--url",
                          f"http://guest:guest@127.0.0.1:{dest.http_port}", "shovel", "status"],
                         capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0 and "move-outbox" in cli.stdout, cli.stderr
    wait_for(lambda: httpx.get(f"{dest.url}/api/parameters/shovel", auth=GUEST).json() == [],
             "the shovel to finish and delete itself", 120)
    bodies = drain(dest, "inbox")
    assert set(bodies) == {f"m{index}".encode() for index in range(COUNT)}
    assert len(bodies) - COUNT < 200  # copies only of what was in flight at the kill
    assert drain(src, "outbox") == []


def test_bad_shovel_definitions_are_refused(pair: dict[str, BrokerProcess]) -> None:
    with httpx.Client(base_url=pair["dest"].url, auth=GUEST, timeout=10) as http:
        for value, named in (({"src-uri": "amqp://h", "dest-uri": "amqp://"}, "src-queue"),
                             ({"src-uri": "http://h", "src-queue": "q", "dest-uri": "amqp://"},
                              "amqp://"),
                             ({"src-uri": "amqp://h", "src-queue": "q", "dest-uri": "amqp://",
                               "src-delete-after": "soon"}, "src-delete-after")):
            reply = http.put("/api/parameters/shovel/%2F/bad", json={"value": value})
            assert reply.status_code == 400 and named in reply.text, reply.text


def _shovel(broker: BrokerProcess, name: str, value: dict[str, object]) -> None:
    with httpx.Client(base_url=broker.url, auth=GUEST, timeout=10) as http:
        reply = http.put(f"/api/parameters/shovel/%2F/{name}", json={"value": value})
        assert reply.status_code == 201, reply.text


def _finished(broker: BrokerProcess) -> bool:
    return bool(httpx.get(f"{broker.url}/api/parameters/shovel", auth=GUEST).json() == [])


def test_a_shovel_between_two_local_queues_moves_all_without_a_connection(
        pair: dict[str, BrokerProcess]) -> None:
    broker = pair["src"]
    fill(broker, "local-out", COUNT)
    fill(broker, "local-in", 0)
    _shovel(broker, "local-move", {
        "src-uri": "amqp://", "src-queue": "local-out", "dest-uri": "amqp:///%2F",
        "dest-queue": "local-in", "src-delete-after": "queue-length",
        "ack-mode": "on-confirm", "src-prefetch-count": 200})
    wait_for(lambda: _finished(broker), "the local shovel to move everything and finish", 60)
    bodies = drain(broker, "local-in")
    assert sorted(bodies) == sorted(f"m{index}".encode() for index in range(COUNT))
    assert drain(broker, "local-out") == []
    connections = httpx.get(f"{broker.url}/api/connections", auth=GUEST).json()
    assert connections == []  # a direct consumer and publisher: no AMQP connection to itself


def test_a_local_source_feeds_a_remote_broker_and_stops_at_its_count(
        pair: dict[str, BrokerProcess]) -> None:
    src, dest = pair["src"], pair["dest"]
    fill(src, "outbound", COUNT + 500)
    _shovel(src, "to-remote", {
        "src-uri": "amqp://", "src-queue": "outbound",
        "dest-uri": f"amqp://guest:guest@127.0.0.1:{dest.amqp_port}", "dest-queue": "arrived",
        "src-delete-after": COUNT, "ack-mode": "on-confirm", "src-prefetch-count": 200})
    wait_for(lambda: _finished(src), "the shovel to move its count and finish", 60)
    bodies = drain(dest, "arrived")
    assert len(bodies) == COUNT and len(set(bodies)) == COUNT
    assert len(drain(src, "outbound")) == 500  # beyond src-delete-after: left in place


def _queue_names(broker: BrokerProcess) -> set[str]:
    rows = httpx.get(f"{broker.url}/api/queues/%2F", auth=GUEST, timeout=10).json()
    return {str(row["name"]) for row in rows}


def test_a_local_source_exchange_and_a_missing_source_queue(
        pair: dict[str, BrokerProcess]) -> None:
    """As RabbitMQ's shovel: a source exchange gets a queue of its own, bound with the
    key and gone with the shovel; a missing source queue is declared durable."""
    broker = pair["src"]
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", broker.amqp_port)) as c:
        channel = c.channel()
        channel.exchange_declare("events", "topic", durable=True)
        channel.queue_declare("copied", durable=True)
    before = _queue_names(broker)
    _shovel(broker, "from-exchange", {
        "src-uri": "amqp://", "src-exchange": "events", "src-exchange-key": "orders.#",
        "dest-uri": "amqp://", "dest-queue": "copied"})
    _shovel(broker, "from-new-queue", {
        "src-uri": "amqp://", "src-queue": "not-yet", "dest-uri": "amqp://",
        "dest-queue": "copied"})
    wait_for(lambda: len(shovels(broker)) == 2
             and all(row["state"] == "running" for row in shovels(broker)),
             "both shovels running", 30)
    made = _queue_names(broker) - before
    assert "not-yet" in made and len(made) == 2, made
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", broker.amqp_port)) as c:
        channel = c.channel()
        channel.confirm_delivery()
        for index in range(200):
            key = "orders.new" if index % 2 == 0 else "audit.new"
            channel.basic_publish("events", key, f"e{index}".encode(),
                                  pika.BasicProperties(delivery_mode=2))
        for index in range(100):
            channel.basic_publish("", "not-yet", f"q{index}".encode(),
                                  pika.BasicProperties(delivery_mode=2))
    wanted = {f"e{index}".encode() for index in range(0, 200, 2)} | \
        {f"q{index}".encode() for index in range(100)}
    got: list[bytes] = []
    wait_for(lambda: got.extend(drain(broker, "copied")) or len(got) >= len(wanted),
             "the matching messages in 'copied'", 30)
    assert sorted(got) == sorted(wanted)
    with httpx.Client(base_url=broker.url, auth=GUEST, timeout=10) as http:
        assert http.delete("/api/parameters/shovel/%2F/from-exchange").status_code == 204
    wait_for(lambda: _queue_names(broker) - before == {"not-yet"},
             "the source exchange's queue gone with its shovel", 30)
