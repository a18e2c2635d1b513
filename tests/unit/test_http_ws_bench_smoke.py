"""Smoke test: the HTTP / WebSocket benchmark runs end to end against a broker it starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "http_ws_bench.py"
WORKLOADS = {"amqp_publish_confirm", "ws_publish_confirm", "ws_consume_ack",
             "rest_batch_publish", "replay", "ratios"}


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_bench_prints_every_workload_with_positive_figures() -> None:
    command = [sys.executable, str(SCRIPT), "--messages", "300", "--per-frame", "50",
               "--prefetch", "100", "--ack-every", "10", "--timeout-s", "30", "--trials", "2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=85, check=False,
                          cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    results = {r["workload"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert set(results) == WORKLOADS, done.stdout
    for name in WORKLOADS - {"ratios"}:
        assert results[name]["messages"] == 300, results[name]
        assert results[name]["msg_s"] > 0, results[name]
    assert results["ws_publish_confirm"]["nacked"] == 0
    assert results["replay"]["mb_s"] > 0
    for name in ("amqp_publish_confirm", "ws_publish_confirm"):  # alternating trials
        trials = results[name]["trials_msg_s"]
        assert len(trials) == 2 and results[name]["msg_s"] == max(trials), results[name]
    ratios = results["ratios"]
    assert ratios["ws_publish_vs_amqp_publish"] > 0 and ratios["ws_publish_target"] == 3.0
