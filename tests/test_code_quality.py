"""ruff, mypy and import-linter are part of the test suite, so CI keeps the code clean."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "ruff", "check", "."],
        [sys.executable, "-m", "mypy"],
    ],
    ids=["ruff", "mypy"],
)
def test_tool_is_clean(command: list[str]) -> None:
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_contracts_hold() -> None:
    """The layers (api -> logbroker -> replication -> segments), the connector's HTTP-only
    reach and the pure cores' ports, as import-linter contracts (pyproject.toml)."""
    run = "import sys, importlinter.cli as c; sys.exit(c.lint_imports(no_cache=True, no_logo=True))"
    result = subprocess.run([sys.executable, "-c", run], cwd=ROOT, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout and " kept" in result.stdout, result.stdout
