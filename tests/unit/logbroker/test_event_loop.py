"""resolve_event_loop / run_on: which loop runs a node, and that it really runs on it."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from logbroker import event_loop
from logbroker.event_loop import resolve_event_loop, run_on


def test_auto_means_uvloop_when_installed_and_asyncio_otherwise(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_event_loop("auto") == "uvloop"
    monkeypatch.setattr(event_loop, "_uvloop_installed", lambda: False)
    assert resolve_event_loop("auto") == "asyncio"
    assert resolve_event_loop("asyncio") == "asyncio"


def test_asking_for_a_missing_or_unknown_loop_is_a_clear_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="'trio' is not one of auto, asyncio, uvloop"):
        resolve_event_loop("trio")
    monkeypatch.setattr(event_loop, "_uvloop_installed", lambda: False)
    with pytest.raises(ValueError, match="not installed"):
        resolve_event_loop("uvloop")


async def _loop_type() -> type:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop())


def test_run_on_runs_the_coroutine_on_the_named_loop() -> None:
    assert run_on("uvloop", _loop_type()) is uvloop.Loop
    assert not issubclass(run_on("asyncio", _loop_type()), uvloop.Loop)
