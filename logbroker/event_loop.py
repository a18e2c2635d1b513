"""Which asyncio event loop runs a broker node: `resolve_event_loop`, `run_on`.

The broker's own code only needs asyncio's interface; uvloop (libuv underneath,
the loop uvicorn picks by default) runs the same code with less CPU per
callback and per socket operation. A node is bound by its event loop's CPU on
the machines this project measures, so that shows: WebSocket publish with
confirms rose from a median of 2.95x to 3.30x the AMQP figure in alternating
runs, and the unpaced AMQP run delivers faster while its publishers run
(docs/benchmarks.md). `auto`, the default, takes uvloop when it is installed
(it is a dependency except on Windows, where it does not exist) and asyncio's
own loop otherwise; `asyncio` keeps the standard loop, e.g. to compare.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["EVENT_LOOPS", "resolve_event_loop", "run_on"]

EVENT_LOOPS = ("auto", "asyncio", "uvloop")
T = TypeVar("T")


def _uvloop_installed() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def resolve_event_loop(name: str) -> str:
    """The loop `name` stands for ("asyncio" or "uvloop"); ValueError if it cannot run."""
    if name not in EVENT_LOOPS:
        raise ValueError(f"event loop {name!r} is not one of {', '.join(EVENT_LOOPS)}")
    if name == "auto":
        return "uvloop" if _uvloop_installed() else "asyncio"
    if name == "uvloop" and not _uvloop_installed():
        raise ValueError("event loop 'uvloop' is not installed (pip install uvloop)")
    return name


def run_on(loop_name: str, main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on a new loop of kind `loop_name` (a resolved name)."""
    if loop_name == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)
