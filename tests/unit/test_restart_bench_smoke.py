"""Smoke test: the restart benchmark runs end to end with tiny backlogs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ("seconds", "to_amqp_s", "peak_rss_mib", "steady_rss_mib")

@pytest.mark.timeout(300)
def test_bench_prints_a_line_per_figure_and_a_summary(tmp_path: Path) -> None:
    command = [sys.executable, str(ROOT / "bench" / "restart_bench.py"), "--counts", "20,200",
               "--rounds", "1", "--settle-s", "0", "--dir", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=280, check=False,
                          cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    *figures, summary = lines
    assert [(line["messages"], line["mode"]) for line in figures] == [
        (20, "sigterm"), (20, "kill9"), (200, "sigterm"), (200, "kill9")]
    for line in figures:
        assert all(line[key] > 0 for key in FIGURES), line
        assert (line["mode"] == "sigterm") == ("queue_open_s" in line)
    assert summary["bench"] == "restart-summary"
    assert summary["small"] == 20 and summary["large"] == 200
    assert all(isinstance(met, bool) for met in summary["targets_met"].values())
    assert os.listdir(tmp_path) == []  # the benchmark removes its data
