"""Smoke test: the cluster benchmark runs end to end on the 3-node cluster it starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "cluster_bench.py"
POSITIVE = ("election_ms_p50", "election_ms_p99", "declare_ms_p50_follower",
            "declare_ms_p99_follower", "declare_ms_p50_leader", "declare_ms_p99_leader",
            "direct_publish_msg_s", "forwarded_publish_msg_s", "direct_consume_msg_s",
            "forwarded_consume_msg_s", "forwarding_ratio_publish", "forwarding_ratio_consume")


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_bench_prints_every_figure() -> None:
    command = [sys.executable, str(SCRIPT), "--rounds", "2", "--declares", "20",
               "--messages", "500", "--trials", "1", "--election-timeout-s", "15",
               "--stable-timeout-s", "30", "--start-timeout-s", "30", "--timeout-s", "30"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=85, check=False,
                          cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    result = json.loads(lines[0])
    assert result["bench"] == "cluster"
    for key in POSITIVE:
        assert isinstance(result[key], float) and result[key] > 0, (key, result)
    assert result["election_rounds"] == 2 and len(result["election_ms"]) == 2
    assert len(result["killed_leaders"]) == 2
    assert result["declares"] == 20
    assert result["queue_leader_node"] != result["forwarded_via_node"]
    assert set(result["targets"]) == {"election_p50_under_1s", "forwarding_ratio_at_least_0_7"}
    assert all(isinstance(met, bool) for met in result["targets"].values())
    assert result["targets"]["election_p50_under_1s"] == (result["election_ms_p50"] < 1000)
