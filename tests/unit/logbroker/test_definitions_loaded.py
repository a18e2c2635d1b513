"""A starting node holds logins until its definitions are loaded, and says so after."""

from __future__ import annotations

import asyncio
import time

import pytest

from logbroker.definitions_loaded import DefinitionsLoaded, DefinitionsNotLoaded
from segments.clock import ManualClock


def test_not_loaded_is_a_320_naming_the_node_and_loaded_is_a_latch() -> None:
    loaded = [False]
    readiness = DefinitionsLoaded("n1", lambda: loaded[0])
    with pytest.raises(DefinitionsNotLoaded) as refused:
        readiness.check()
    assert refused.value.reply_code == 320 and "node n1 is starting" in refused.value.text
    loaded[0] = True
    readiness.check()
    loaded[0] = False  # the node lost its leader later: it still answers logins
    assert readiness.ready
    readiness.check()


async def test_wait_returns_once_loaded_and_gives_up_after_the_bound() -> None:
    loaded = [False]
    readiness = DefinitionsLoaded("n1", lambda: loaded[0])
    started = time.monotonic()
    assert not await readiness.wait(0.05)
    assert time.monotonic() - started >= 0.05
    asyncio.get_running_loop().call_later(0.03, loaded.__setitem__, 0, True)
    assert await readiness.wait(5.0)
    assert time.monotonic() - started < 1.0


async def test_the_wait_is_bounded_on_the_injected_clock() -> None:
    clock = ManualClock()
    readiness = DefinitionsLoaded("n1", lambda: False, clock)
    # The bound is 60 s of the clock: it passes in one step, not in real time.
    asyncio.get_running_loop().call_later(0.02, clock.advance, 60_001)
    started = time.monotonic()
    assert not await readiness.wait(60.0)
    assert time.monotonic() - started < 5.0
