"""Smoke test: the AMQP benchmark runs end to end against a logbroker it starts itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "amqp_bench.py"
SERVER = ROOT / "api" / "amqp" / "server.py"
WORKLOADS = {"publish_confirm", "consume", "pubsub_latency"}


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_bench_against_a_served_logbroker_prints_positive_rates() -> None:
    if not SERVER.exists():
        pytest.skip("api/amqp/server.py does not exist yet: no AMQP server to benchmark")
    command = [sys.executable, str(SCRIPT), "--logbroker-serve", "--messages", "200",
               "--duration-s", "1", "--rate", "200", "--timeout-s", "20"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=55, check=False,
                          cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert {result["workload"] for result in results} == WORKLOADS, done.stdout
    for result in results:
        assert result["bench"] == "amqp" and result["target"] == "logbroker"
        assert result["msg_s"] > 0, result
        assert result["messages"] > 0, result
    by_workload = {result["workload"]: result for result in results}
    assert by_workload["publish_confirm"]["messages"] == 200
    assert by_workload["publish_confirm"]["nacked"] == 0
    assert by_workload["consume"]["messages"] == 200
    latency = by_workload["pubsub_latency"]
    assert 0 < latency["p50_ms"] <= latency["p99_ms"] <= latency["max_ms"]
