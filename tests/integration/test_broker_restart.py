"""Restart a real `logbroker serve` process, by SIGKILL and by SIGTERM.

Before the stop: a durable queue gets persistent messages with publisher
confirms and transient ones; a consumer acks some deliveries and leaves others
unacked; a non-durable queue exists. After the restart: every confirmed
persistent message is there at least once (lost = 0), transient messages and
the non-durable queue are gone, nothing unexpected appears, and any message
delivered again is flagged redelivered. After a clean SIGTERM the flags are
exact: only the messages that were delivered before come back redelivered.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from bench.free_ports import free_port

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
PERSISTENT = 300
TRANSIENT = 30
ACKED = 40
UNACKED = 25


class BrokerProcess:
    def __init__(self, data_dir: Path, port: int) -> None:
        self.data_dir = data_dir
        self.port = port
        # Not the default 15672: a broker the README's first command started may hold it.
        self.http_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.data_dir.parent / f"serve-{self.port}.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "logbroker", "serve", "--workers", "1",
             "--data-dir", str(self.data_dir),
             "--amqp-port", str(self.port), "--http-port", str(self.http_port),
             "--host", "127.0.0.1"],
            cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "logbroker serve exited at start"
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise AssertionError("logbroker serve did not listen within 30 s")

    def stop(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)
        self.process.wait(timeout=30)

    def connect(self) -> pika.BlockingConnection:
        return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.port))


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    process = BrokerProcess(tmp_path / "data", port)
    process.start()
    yield process
    if process.process is not None and process.process.poll() is None:
        process.stop(signal.SIGKILL)


def fill_and_half_consume(broker: BrokerProcess) -> tuple[set[bytes], set[bytes]]:
    """Returns (confirmed persistent bodies, bodies delivered before the stop)."""
    connection = broker.connect()
    channel = connection.channel()
    channel.queue_declare("jobs", durable=True)
    channel.queue_declare("scratch", durable=False)
    channel.confirm_delivery()
    confirmed = set()
    for i in range(PERSISTENT):
        body = f"persistent-{i}".encode()
        channel.basic_publish("", "jobs", body, pika.BasicProperties(delivery_mode=2))
        confirmed.add(body)  # basic_publish returned: the broker confirmed it
    for i in range(TRANSIENT):
        channel.basic_publish("", "jobs", f"transient-{i}".encode(),
                              pika.BasicProperties(delivery_mode=1))
    delivered = set()
    for _ in range(ACKED + UNACKED):
        method, _, body = channel.basic_get("jobs", auto_ack=False)
        assert method is not None and not method.redelivered
        delivered.add(body)
        if len(delivered) <= ACKED:
            channel.basic_ack(method.delivery_tag)
    # A round trip after the acks so the broker has read them before the stop.
    channel.queue_declare("jobs", passive=True)
    return confirmed, delivered


def drain(broker: BrokerProcess) -> list[tuple[bytes, bool]]:
    connection = broker.connect()
    channel = connection.channel()
    with pytest.raises(ChannelClosedByBroker) as raised:
        channel.queue_declare("scratch", passive=True)
    assert raised.value.reply_code == 404  # non-durable queues do not survive a restart
    channel = connection.channel()
    got = []
    while True:
        method, _, body = channel.basic_get("jobs", auto_ack=True)
        if method is None:
            break
        got.append((body, bool(method.redelivered)))
    connection.close()
    return got


@pytest.mark.parametrize("stop_signal", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "term"])
def test_nothing_confirmed_is_lost_across_a_restart(
    broker: BrokerProcess, stop_signal: int
) -> None:
    confirmed, delivered = fill_and_half_consume(broker)
    acked = set(sorted(delivered, key=lambda b: int(b.split(b"-")[1]))[:ACKED])
    broker.stop(stop_signal)
    broker.start()
    got = drain(broker)
    bodies = [body for body, _ in got]
    assert not [b for b in bodies if b.startswith(b"transient")], "transient messages survived"
    assert set(bodies) <= confirmed, "a message appeared that was never published"
    lost = confirmed - acked - set(bodies)
    assert not lost, f"{len(lost)} confirmed messages lost"
    duplicates = [b for b in bodies if b in acked]  # acked before the stop, delivered again
    assert all(redelivered for body, redelivered in got if body in delivered), (
        "a message delivered before the stop came back without the redelivered flag")
    assert len(bodies) == len(set(bodies))
    if stop_signal == signal.SIGTERM:
        assert not duplicates, "a clean stop keeps every ack"
        flagged = {body for body, redelivered in got if redelivered}
        assert flagged == delivered - acked, "after a clean stop only delivered ones are flagged"
    print(f"\nrestart by {signal.Signals(stop_signal).name}: {len(bodies)} drained, "
          f"lost 0, duplicates {len(duplicates)} (all flagged redelivered)")
