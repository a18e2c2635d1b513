"""Federation between logbroker and a real RabbitMQ, both ways.

Runs when `rabbitmq-server` is installed (`apt-get install rabbitmq-server`); each
test starts its own private RabbitMQ node on free ports (the one `bench/amqp_bench.py`
uses, with the federation plugin enabled) and stops it after. Skipped otherwise,
with the reason shown.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pika
import pytest

from bench.amqp_bench import RABBITMQ_SERVER, RABBITMQCTL, _rabbitmq_env, _served
from bench.free_ports import free_port
from bench.rabbitmq_cluster import _kill_epmd
from tests.integration.conftest import BrokerProcess, start_broker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not os.path.exists(RABBITMQ_SERVER),
    reason="rabbitmq-server is not installed (apt-get install rabbitmq-server)")]
GUEST = ("guest", "guest")


class Rabbit:
    def __init__(self, url: str, node: str, env: dict[str, str]) -> None:
        self.url, self.node, self.env = url, node, env

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].strip("/"))

    def ctl(self, *args: str) -> None:
        subprocess.run([RABBITMQCTL, "-n", self.node, *args], env=self.env, check=True,
                       capture_output=True, timeout=120)


@contextmanager
def rabbitmq_with_federation() -> Iterator[Rabbit]:
    """A private node with its own epmd on a free port (a shared epmd would be killed
    with whichever node started it), stopped with its epmd at the end."""
    port, node = free_port(), f"interop-{os.getpid()}-{free_port()}@localhost"
    epmd_port = free_port()
    env: dict[str, str] = {}

    def command(workdir: str) -> tuple[list[str], dict[str, str]]:
        env.update(_rabbitmq_env(workdir, port, node), ERL_EPMD_PORT=str(epmd_port),
                   ERL_EPMD_ADDRESS="127.0.0.1")
        Path(workdir, "enabled_plugins").write_text("[rabbitmq_federation].\n")
        return [RABBITMQ_SERVER], env

    try:
        with _served("rabbitmq", port, command, [RABBITMQCTL, "-n", node, "stop"]) as url:
            yield Rabbit(url, node, env)
    finally:
        _kill_epmd(epmd_port)


def connection(port: int) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))


def get_all(port: int, queue: str) -> list[tuple[bytes, object]]:
    with connection(port) as c:
        channel = c.channel()
        got = []
        while (message := channel.basic_get(queue, auto_ack=True))[0] is not None:
            got.append((message[2], (message[1].headers or {}).get("x-received-from")))
        return got


@pytest.fixture
def logbroker_node(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path / "lb", "--node-name", "logbroker-interop")
    try:
        yield broker
    finally:
        broker.stop()


def test_a_rabbitmq_upstream_feeds_a_logbroker_federated_exchange(
        logbroker_node: BrokerProcess) -> None:
    with rabbitmq_with_federation() as rabbit, \
            httpx.Client(base_url=logbroker_node.url, auth=GUEST, timeout=10) as http:
        http.put("/api/parameters/federation-upstream/%2F/rabbit",
                 json={"value": {"uri": rabbit.url.rstrip("/") + "/%2F"}})
        http.put("/api/exchanges/%2F/fed-x", json={"type": "topic"})
        http.put("/api/queues/%2F/fed-q", json={"durable": True})
        http.post("/api/bindings/%2F/e/fed-x/q/fed-q", json={"routing_key": "orders.#"})
        http.put("/api/policies/%2F/fed", json={
            "pattern": "^fed-", "apply-to": "exchanges",
            "definition": {"federation-upstream-set": "all"}})
        wait_for(lambda: [link["status"] for link in http.get("/api/federation-links").json()]
                 == ["running"], "the link to RabbitMQ to run", 30)
        with connection(rabbit.port) as c:
            channel = c.channel()
            channel.confirm_delivery()
            channel.basic_publish("fed-x", "orders.new", b"from rabbitmq",
                                  pika.BasicProperties(delivery_mode=2))
            channel.basic_publish("fed-x", "other", b"not bound downstream")
        got = wait_for(lambda: get_all(logbroker_node.amqp_port, "fed-q"), "the message", 20)
        assert [body for body, _ in got] == [b"from rabbitmq"]
        [(_, received)] = got
        assert isinstance(received, list) and received[0]["exchange"] == "fed-x"


def test_a_rabbitmq_downstream_federates_from_logbroker(logbroker_node: BrokerProcess) -> None:
    with rabbitmq_with_federation() as rabbit:
        rabbit.ctl("set_parameter", "federation-upstream", "lb", '{"uri": "amqp://guest:guest@'
                   f'127.0.0.1:{logbroker_node.amqp_port}"' + "}")
        with connection(rabbit.port) as c:
            channel = c.channel()
            channel.exchange_declare("fed-x", "topic", durable=True)
            channel.queue_declare("rabbit-q", durable=True)
            channel.queue_bind("rabbit-q", "fed-x", "orders.#")
        rabbit.ctl("set_policy", "--apply-to", "exchanges", "fed", "^fed-",
                   '{"federation-upstream-set": "all"}')

        def link_queue_upstream() -> bool:  # RabbitMQ's link declared its queue here
            queues = httpx.get(f"{logbroker_node.url}/api/queues/%2F", auth=GUEST).json()
            return any(q["name"].startswith("federation: fed-x -> ") and q["consumers"]
                       for q in queues)

        wait_for(link_queue_upstream, "RabbitMQ's link to consume from logbroker", 60)
        with connection(logbroker_node.amqp_port) as c:
            channel = c.channel()
            channel.confirm_delivery()
            channel.basic_publish("fed-x", "orders.new", b"from logbroker",
                                  pika.BasicProperties(delivery_mode=2))
        got = wait_for(lambda: get_all(rabbit.port, "rabbit-q"), "the message in RabbitMQ", 30)
        assert [body for body, _ in got] == [b"from logbroker"]


def test_a_federated_queue_takes_from_a_rabbitmq_queue(logbroker_node: BrokerProcess) -> None:
    with rabbitmq_with_federation() as rabbit, \
            httpx.Client(base_url=logbroker_node.url, auth=GUEST, timeout=10) as http:
        with connection(rabbit.port) as c:
            channel = c.channel()
            channel.queue_declare("work", durable=True)
            channel.confirm_delivery()
            for index in range(20):
                channel.basic_publish("", "work", f"r{index}".encode(),
                                      pika.BasicProperties(delivery_mode=2))
        http.put("/api/parameters/federation-upstream/%2F/rabbit",
                 json={"value": {"uri": rabbit.url.rstrip("/") + "/%2F"}})
        http.put("/api/queues/%2F/work", json={"durable": True})
        http.put("/api/policies/%2F/fq", json={"pattern": "^work$", "apply-to": "queues",
                                               "definition": {"federation-upstream": "rabbit"}})
        with connection(logbroker_node.amqp_port) as c:
            channel = c.channel()
            channel.basic_qos(prefetch_count=5)
            bodies = []
            for method, _properties, body in channel.consume("work", inactivity_timeout=20):
                assert method is not None, "nothing came from RabbitMQ"
                bodies.append(body)
                channel.basic_ack(method.delivery_tag)
                if len(bodies) == 20:
                    break
            channel.cancel()
        assert sorted(bodies) == sorted(f"r{index}".encode() for index in range(20))


def test_a_rabbitmq_federated_queue_takes_from_logbroker(
        logbroker_node: BrokerProcess) -> None:
    with connection(logbroker_node.amqp_port) as c:
        channel = c.channel()
        channel.queue_declare("work", durable=True)
        channel.confirm_delivery()
        for index in range(20):
            channel.basic_publish("", "work", f"l{index}".encode(),
                                  pika.BasicProperties(delivery_mode=2))
    with rabbitmq_with_federation() as rabbit:
        rabbit.ctl("set_parameter", "federation-upstream", "lb", '{"uri": "amqp://guest:guest@'
                   f'127.0.0.1:{logbroker_node.amqp_port}"' + "}")
        with connection(rabbit.port) as c:
            c.channel().queue_declare("work", durable=True)
        rabbit.ctl("set_policy", "--apply-to", "queues", "fq", "^work$",
                   '{"federation-upstream-set": "all"}')
        with connection(rabbit.port) as c:
            channel = c.channel()
            channel.basic_qos(prefetch_count=5)
            bodies = []
            for method, _properties, body in channel.consume("work", inactivity_timeout=30):
                assert method is not None, "nothing came from logbroker"
                bodies.append(body)
                channel.basic_ack(method.delivery_tag)
                if len(bodies) == 20:
                    break
            channel.cancel()
        assert sorted(bodies) == sorted(f"l{index}".encode() for index in range(20))
