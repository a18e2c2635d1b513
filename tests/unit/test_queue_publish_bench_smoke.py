"""Smoke test: the queue publish benchmark runs end to end with tiny parameters."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "queue_publish_bench.py"


@pytest.mark.timeout(60)
def test_bench_prints_one_json_line_with_both_figures() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--messages", "200", "--batch", "10", "--rounds", "1"],
        capture_output=True, text=True, timeout=50, check=True)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(figures) == {"single_msgs_per_cpu_s", "batch10_msgs_per_cpu_s"}
    assert all(value > 0 for value in figures.values())
