"""The `logbroker` parser: a subcommand's handler is imported only when it is chosen.

Each client subcommand names its handler `"module:function"` (a module of
`api.cli`); parsing the command line replaces the name with the function. So
`logbroker serve` never imports the client commands and what they pull in
(httpx, aiormq, the perf tool, plotting): the broker starts sooner, and a
client command imports only its own module.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence
from typing import Any

Handler = Callable[..., int]
PACKAGE = "api.cli"


def handler_of(name: str) -> Handler:
    """`"admin_commands:purge"` -> `api.cli.admin_commands.purge`."""
    module_name, _, function_name = name.partition(":")
    handler: Handler = getattr(importlib.import_module(f"{PACKAGE}.{module_name}"),
                               function_name)
    return handler


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser (its subparsers are of this class too) that imports the chosen
    subcommand's handler once the arguments are parsed."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None,
                         ) -> tuple[argparse.Namespace, list[str]]:
        parsed, rest = super().parse_known_args(args, namespace)
        handler: Any = getattr(parsed, "handler", None)
        if isinstance(handler, str):
            parsed.handler = handler_of(handler)
        return parsed, rest
