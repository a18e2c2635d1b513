"""Smoke test: the storage benchmark runs end to end with tiny parameters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "segments_bench.py"

NUMERIC_KEYS = (
    "append_mb_s",
    "append_msgs_s",
    "raw_write_mb_s",
    "append_ratio",
    "read_mb_s",
    "group_commit_msgs_s",
    "group_commit_fsyncs_s",
    "group_commit_avg_group",
    "fsyncs_per_s",
    "group_commit_vs_fsync_ratio",
    "recovery_s_100mib",
    "recovery_s_1gib",
    "recovery_ratio_1gib_vs_100mib",
    "rss_mib_1gib_open",
)
TARGETS = (
    "append_ratio_ge_0.7",
    "group_commit_vs_fsync_ratio_ge_20",
    "recovery_ratio_le_2",
    "rss_lt_100_mib",
)


@pytest.mark.timeout(60)
def test_bench_prints_one_json_line_with_every_figure(tmp_path: Path) -> None:
    command = [
        sys.executable, str(SCRIPT), "--dir", str(tmp_path),
        "--append-mib", "4", "--duration-s", "0.5",
        "--big-mib", "16", "--small-mib", "4", "--rounds", "1",
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=30, check=False,
        cwd=SCRIPT.parents[1],
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    result = json.loads(lines[0])
    assert result["bench"] == "segments"
    for key in NUMERIC_KEYS:
        value = result[key]
        assert isinstance(value, int | float) and not isinstance(value, bool), key
        assert value > 0, (key, value)
    assert set(result["targets_met"]) == set(TARGETS)
    assert all(isinstance(met, bool) for met in result["targets_met"].values())
    assert result["params"]["rounds"] == 1
    assert result["params"]["record_encoder"] in ("c", "python")
    # The benchmark removes its own temp directory.
    assert os.listdir(tmp_path) == []


@pytest.mark.timeout(60)
def test_crc_copy_ab_prints_both_sides_of_every_figure(tmp_path: Path) -> None:
    command = [sys.executable, str(SCRIPT), "--dir", str(tmp_path), "--crc-copy-ab",
               "--append-mib", "1", "--rounds", "2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False,
                          cwd=SCRIPT.parents[1])
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    result = json.loads(line)
    assert result["bench"] == "segments-crc-copy-ab" and result["crc_ab_rounds"] == 2
    for figure in ("append", "append_cpu", "read", "encode_us"):
        assert result[f"crc_ab_{figure}_on"] > 0 and result[f"crc_ab_{figure}_off"] > 0
        assert 0 <= result[f"crc_ab_{figure}_on_won"] <= 2
    assert os.listdir(tmp_path) == []
