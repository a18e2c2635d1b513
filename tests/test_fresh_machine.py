"""The README's two commands are what a fresh machine runs, and CI runs the second one.

A green CI must mean a fresh machine passes: `.ci/run` makes a new virtual
environment and runs exactly the README's test command in it, and that command
installs the test tools at versions known to work together (`constraints.txt`
pins every package it installs, so pip cannot pick a new release that breaks
them, as pytest 9.2.0 broke schemathesis 4.32.5).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    block = (ROOT / "README.md").read_text().split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def pinned() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[_normal(name)] = version
    return pins


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_readme_opens_with_the_two_commands() -> None:
    serve, test = readme_commands()
    assert serve.endswith("python3 -m logbroker serve")
    assert test == "python3 -m pip install -e '.[test]' -c constraints.txt && python3 -m pytest"


def test_ci_runs_the_readme_test_command_in_a_new_virtual_environment() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    commands = [line.split("#", 1)[0].strip() for line in script.splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    assert any(re.match(r'python3 -m venv "?\$venv"?$', command) for command in commands)
    assert any("bin/activate" in command for command in commands)
    assert commands[-1] == readme_commands()[1]


def test_every_dependency_is_pinned() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    pins = pinned()
    for requirement in wanted:
        name = _normal(re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0])
        assert name in pins, f"{name} is not pinned in constraints.txt"
