"""ruff and mypy are part of the test suite, so CI keeps the code clean."""

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


def test_layers_never_import_upward() -> None:
    """api -> logbroker -> replication -> segments; nothing imports a layer above it."""
    rank = {"segments": 0, "replication": 1, "logbroker": 2, "api": 3}
    offenders = []
    for package, level in rank.items():
        for path in (ROOT / package).rglob("*.py"):
            if path.name in ("__main__.py", "cli.py", "server.py", "composition.py"):
                continue  # the composition root wires every layer
            for line in path.read_text().splitlines():
                words = line.split()
                if len(words) >= 2 and words[0] in ("import", "from"):
                    top = words[1].split(".")[0]
                    if top == "connectors" or rank.get(top, -1) > level:
                        offenders.append(f"{path.relative_to(ROOT)}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
