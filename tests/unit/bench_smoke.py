"""Shared by the benchmark smoke tests: run a bench script, parse its one JSON line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_bench(script: str, arguments: list[str], timeout_s: float) -> dict[str, Any]:
    """Run `bench/<script>` with `arguments`; exit code 0 and exactly one stdout line."""
    command = [sys.executable, str(ROOT / "bench" / script), *arguments]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s,
                          check=False, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    result: dict[str, Any] = json.loads(lines[0])
    return result
