"""`logbroker perf` against a real broker, run as a subprocess as a user would.

The summary's counts must be the broker's own (`/api/queues/...` message_stats):
every message sent was published, confirmed and delivered once. The samples
and plots are written as asked. One short run against a private RabbitMQ
when `rabbitmq-server` is installed (the federation interop tests' node).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bench.amqp_bench import RABBITMQ_SERVER
from tests.integration.conftest import BrokerProcess

LOGBROKER = [sys.executable, "-m", "logbroker"]
RUN_TIMEOUT_S = 120.0
TOTALS = re.compile(r"^totals: sent (\d+), confirmed (\d+), nacked (\d+), returned (\d+), "
                    r"received (\d+)$", re.MULTILINE)
LIVE = re.compile(r"^time +[\d.]+ s, sent \d+ msg/s, confirmed \d+ msg/s, nacked \d+ msg/s, "
                  r"returned \d+ msg/s, received \d+ msg/s, latency p50/p95/p99/max "
                  r"[\d.]+/[\d.]+/[\d.]+/[\d.]+ ms$", re.MULTILINE)


def perf(*args: str) -> tuple[dict[str, int], str]:
    result = subprocess.run([*LOGBROKER, "perf", *args], capture_output=True,
                            timeout=RUN_TIMEOUT_S, check=False,
                            env={k: v for k, v in os.environ.items() if k != "LOGBROKER_URL"})
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode() + out
    totals = TOTALS.search(out)
    assert totals is not None, out
    names = ("sent", "confirmed", "nacked", "returned", "received")
    return dict(zip(names, map(int, totals.groups()), strict=True)), out


def queue_stats(broker: BrokerProcess, queue: str) -> dict[str, int]:
    answer = httpx.get(f"{broker.url}/api/queues/%2F/{queue}", auth=("guest", "guest"),
                       timeout=10.0)
    answer.raise_for_status()
    stats: dict[str, int] = answer.json()["message_stats"]
    return stats


def test_a_five_second_amqp_run_counts_what_the_broker_counted(
        broker: BrokerProcess, tmp_path: Path) -> None:
    outputs = {name: tmp_path / name for name in ("run.json", "run.csv", "run.html", "run.png")}
    totals, out = perf("-h", f"amqp://guest:guest@127.0.0.1:{broker.amqp_port}/", "-x", "1",
                       "-y", "1", "-c", "100", "-z", "5", "-u", "perf.amqp", "-ad", "false",
                       "--output", str(outputs["run.json"]), "--output", str(outputs["run.csv"]),
                       "--plot", str(outputs["run.html"]), "--plot", str(outputs["run.png"]))
    assert len(LIVE.findall(out)) >= 4, out
    stats = queue_stats(broker, "perf.amqp")
    assert totals["sent"] > 0
    assert totals["sent"] == totals["confirmed"] == totals["received"], out
    assert (totals["nacked"], totals["returned"]) == (0, 0)
    assert (stats["publish"], stats["deliver_get"], stats["ack"]) == (
        totals["sent"], totals["received"], totals["received"])
    document = json.loads(outputs["run.json"].read_text())
    assert len(document["samples"]) >= 5
    assert document["summary"]["sent"] == totals["sent"]
    assert outputs["run.csv"].read_text().startswith("elapsed_s,sent,confirmed,nacked,")
    html = outputs["run.html"].read_text()
    assert '"name":"sent msg\\u002fs"' in html and '"name":"latency p99 ms"' in html
    assert outputs["run.png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_websocket_run_counts_what_the_broker_counted(broker: BrokerProcess) -> None:
    totals, out = perf("--ws", f"http://guest:guest@127.0.0.1:{broker.http_port}", "-x", "1",
                       "-y", "1", "-c", "200", "-A", "10", "-z", "2", "-u", "perf.ws",
                       "-ad", "false")
    stats = queue_stats(broker, "perf.ws")
    assert totals["sent"] > 0
    assert totals["sent"] == totals["confirmed"] == totals["received"], out
    assert (stats["publish"], stats["deliver_get"], stats["ack"]) == (
        totals["sent"], totals["received"], totals["received"])


def test_a_message_limit_ends_the_run(broker: BrokerProcess) -> None:
    totals, out = perf("-h", f"amqp://guest:guest@127.0.0.1:{broker.amqp_port}/", "-x", "2",
                       "-y", "2", "-C", "300", "--queue-pattern", "perf.limit-%d",
                       "--queue-pattern-to", "2", "-ad", "false", "-f", "persistent")
    assert "stopped by producer message limit" in out
    assert totals["sent"] == totals["received"] == 600
    assert [queue_stats(broker, f"perf.limit-{n}")["publish"] for n in (1, 2)] == [300, 300]


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(RABBITMQ_SERVER),
                    reason="rabbitmq-server is not installed (apt-get install rabbitmq-server)")
def test_a_short_run_against_rabbitmq() -> None:
    from tests.integration.federation.test_rabbitmq_interop import rabbitmq_with_federation

    with rabbitmq_with_federation() as rabbit:
        totals, out = perf("-h", f"amqp://guest:guest@127.0.0.1:{rabbit.port}/", "-x", "1",
                           "-y", "1", "-c", "50", "-z", "2", "-f", "mandatory")
    assert totals["sent"] > 0
    assert totals["sent"] == totals["confirmed"] == totals["received"], out
    assert totals["returned"] == 0


def test_unroutable_mandatory_messages_count_as_returned(broker: BrokerProcess) -> None:
    totals, _ = perf("-h", f"amqp://guest:guest@127.0.0.1:{broker.amqp_port}/", "-y", "0",
                     "-e", "", "-k", "perf.no-such-queue", "-f", "mandatory", "-c", "10",
                     "-C", "50")
    assert (totals["sent"], totals["returned"], totals["confirmed"]) == (50, 50, 0)
    totals, _ = perf("--ws", f"http://guest:guest@127.0.0.1:{broker.http_port}", "-y", "0",
                     "-e", "", "-k", "perf.no-such-queue", "-f", "mandatory", "-C", "50")
    assert (totals["sent"], totals["returned"], totals["confirmed"]) == (50, 50, 0)


def test_ctrl_c_stops_the_run_and_prints_the_summary(broker: BrokerProcess) -> None:
    process = subprocess.Popen(
        [*LOGBROKER, "perf", "-h", f"amqp://guest:guest@127.0.0.1:{broker.amqp_port}/",
         "-r", "200", "-z", "60", "-u", "perf.interrupted", "-ad", "false"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # the first live line: the run is going
        assert first.startswith("time"), first + process.stderr.read()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert "stopped by interrupt" in out
    totals = TOTALS.search(out)
    assert totals is not None and int(totals.group(1)) == int(totals.group(5)) > 0
