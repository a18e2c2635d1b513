"""`logbroker`'s parser: handlers named `module:function`, imported once chosen.

What `serve` imports is checked in a fresh interpreter (`sys.modules` of this
one holds whatever other tests imported): never a client command, the HTTP
client, the perf tool, plotting or Spark; and nothing of the HTTP stack before
the AMQP listener opens (it is imported in a thread once AMQP answers).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from api.cli import admin_commands, perf_command
from api.cli.command_parser import handler_of
from api.node import build_parser

# Top-level packages and api.cli modules only a client command may import.
CLIENT_SIDE = {"httpx", "aiormq", "click", "plotly", "matplotlib", "pyspark", "pika",
               "api.client", "api.cli.run", "api.cli.admin_commands", "api.cli.perf_command",
               "api.cli.message_commands", "api.cli.dev_cluster", "api.perf.perf_run"}
HTTP_STACK = {"fastapi", "pydantic", "starlette", "uvicorn", "api.http"}


def _imported_by(code: str, watched: set[str]) -> list[str]:
    """The watched modules (or packages) that `code` imports, in a fresh interpreter."""
    probe = (f"{code}\nimport json, sys\nwatched = {sorted(watched)!r}\n"
             "print(json.dumps(sorted(m for m in sys.modules if any(\n"
             "    m == w or m.startswith(w + '.') for w in watched))))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=120, check=True)
    found: list[str] = json.loads(result.stdout)
    return found


def test_serve_imports_no_client_command_nor_the_perf_tool() -> None:
    code = ("from api.node import build_parser\n"
            "assert build_parser().parse_args(['serve']).command == 'serve'")
    assert _imported_by(code, CLIENT_SIDE) == []


def test_the_amqp_listener_and_the_broker_need_no_http_stack() -> None:
    code = "import api.node, api.amqp.server, logbroker.broker, logbroker.gc_tuning"
    assert _imported_by(code, HTTP_STACK | CLIENT_SIDE) == []


def test_a_chosen_subcommand_gets_its_function() -> None:
    assert build_parser().parse_args(["purge", "q"]).handler is admin_commands.purge
    assert build_parser().parse_args(["perf", "-z", "1"]).handler is perf_command.perf


def _handler_names(parser: argparse.ArgumentParser) -> list[str]:
    names = [parser.get_default("handler")] if parser.get_default("handler") else []
    for action in parser._actions:  # argparse keeps its subparsers only there
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                names += _handler_names(child)
    return names


def test_every_named_handler_is_a_function() -> None:
    names = _handler_names(build_parser())
    assert len(names) > 30 and all(isinstance(name, str) for name in names)
    for name in names:
        assert callable(handler_of(name)), name


def test_a_bad_name_fails_loudly() -> None:
    with pytest.raises(ModuleNotFoundError):
        handler_of("no_such_commands:run")
    with pytest.raises(AttributeError):
        handler_of("admin_commands:no_such_function")
