"""Smoke test: the paced latency benchmark runs end to end, one node and three replicas."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_bench_prints_a_line_per_run_and_per_topology_and_pace() -> None:
    command = [sys.executable, str(ROOT / "bench" / "latency_bench.py"), "--logbroker-only",
               "--rounds", "2", "--paces", "200,400", "--duration-s", "0.5",
               "--settle-max-s", "0.2", "--warmup-s", "0.3", "--start-timeout-s", "60",
               "--timeout-s", "30",
               "--stable-timeout-s", "30"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=115, check=False,
                          cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    runs = [line for line in lines if line["bench"] == "latency_run"]
    summaries = [line for line in lines if line["bench"] == "latency"]
    assert len(runs) == 2 * 2 * 2  # topologies x rounds x paces, logbroker only
    assert {(s["topology"], s["pace_msg_s"]) for s in summaries} == {
        (topology, pace) for topology in ("single", "replicated") for pace in (200.0, 400.0)}
    for run in runs:
        assert run["target"] == "logbroker" and run["messages"] > 0
        assert 0 < run["p50_ms"] <= run["p99_ms"] <= run["max_ms"], run
    for summary in summaries:
        assert summary["rounds"] == 2 and len(summary["logbroker"]["p99_ms"]) == 2
        assert "p99_ratio" not in summary and "target_met" not in summary
        assert summary["machine"]["cores"] >= 1


def test_the_summary_counts_rounds_where_logbroker_p99_is_at_most_rabbitmq() -> None:
    sys.path.insert(0, str(ROOT))
    from bench.latency_bench import summarize

    def run(target: str, round_: int, p99: float) -> dict[str, object]:
        return {"bench": "latency_run", "topology": "single", "round": round_,
                "target": target, "pace_msg_s": 1000.0, "p50_ms": p99 / 3, "p99_ms": p99}

    runs = [run("logbroker", 1, 1.0), run("rabbitmq", 1, 2.0),
            run("logbroker", 2, 3.0), run("rabbitmq", 2, 2.0),
            run("logbroker", 3, 2.0), run("rabbitmq", 3, 2.0)]
    summary = summarize(runs, "single", 1000.0, 3, {"cores": 2})
    assert summary["logbroker"]["p99_ms"] == [1.0, 3.0, 2.0]
    assert summary["rabbitmq"]["p99_ms"] == [2.0, 2.0, 2.0]
    assert summary["p99_ratio"] == [0.5, 1.5, 1.0] and summary["p99_ratio_median"] == 1.0
    assert summary["rounds_logbroker_p99_le_rabbitmq"] == 2
    assert summary["target_met"] is False and summary["rounds"] == 3
    assert summarize(runs, "single", 1000.0, 2, {})["target_met"] is True
