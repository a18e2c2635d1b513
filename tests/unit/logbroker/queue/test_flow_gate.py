"""FlowGate: one future per hold, ended by the queue's figures or by the clock."""

from __future__ import annotations

import asyncio

from logbroker.queue.flow_gate import FlowGate, of_connection, take_pending, wait_for_holds
from logbroker.queue.publisher_flow import FlowLimits, PublisherFlow
from segments.clock import SYSTEM_CLOCK, Clock, ManualClock

LIMITS = FlowLimits(high=5, low=2, stall_ms=30, hold_max_ms=200, trial_hold_max_ms=200,
                    open_min_ms=0, trial_ms=10_000)


class Figures:
    def __init__(self) -> None:
        self.ready = 10
        self.consumers = 1
        self.delivered = 0

    def __call__(self) -> tuple[int, int, int]:
        return self.ready, self.consumers, self.delivered


def held_gate(figures: Figures, clock: Clock = SYSTEM_CLOCK
              ) -> tuple[FlowGate, asyncio.Future[None]]:
    gate = FlowGate(figures, PublisherFlow(LIMITS), clock)
    assert gate.hold() is None  # the first publish over `high` only starts measuring
    hold = gate.hold()
    assert hold is not None and not hold.done()
    assert gate.hold() is hold  # every publisher of this hold waits on the same future
    return gate, hold


async def test_check_releases_the_publishers_once_the_backlog_is_low() -> None:
    figures = Figures()
    gate, hold = held_gate(figures)
    figures.ready, figures.delivered = 4, 6
    gate.check()
    assert not hold.done()
    figures.ready, figures.delivered = 2, 8
    gate.check()
    assert hold.done()
    assert not gate.flow.holding


async def test_a_stalled_queue_lets_its_publishers_go_on_the_timer() -> None:
    figures = Figures()
    _, hold = held_gate(figures)
    await asyncio.wait_for(hold, 1.0)  # nothing delivered for stall_ms: released


async def test_progress_defers_the_stall_but_not_the_maximum() -> None:
    figures = Figures()
    clock = ManualClock()
    gate, hold = held_gate(figures, clock)
    started = clock.monotonic_ms()
    while not hold.done():
        figures.delivered += 1  # consumers keep taking, the backlog never gets low
        clock.advance(10)
        gate.check()
        assert clock.monotonic_ms() - started < 1000
    assert clock.monotonic_ms() - started >= 200  # the hold's maximum, not the stall


async def test_release_ends_a_hold_at_once() -> None:
    figures = Figures()
    gate, hold = held_gate(figures)
    gate.release()
    assert hold.done()
    assert not gate.flow.holding
    assert gate.hold() is not hold  # a later hold is a new one


def test_a_channel_key_belongs_to_its_connection_only() -> None:
    assert of_connection("10.0.0.1:5000:7:1", "10.0.0.1:5000:7")  # an AMQP channel
    assert of_connection("ws-3", "ws-3")  # a WebSocket's key is its connection id
    assert not of_connection("10.0.0.1:5000:71:1", "10.0.0.1:5000:7")
    assert not of_connection("ws-31", "ws-3")


async def test_take_pending_empties_the_list_and_wait_returns_once_holds_end() -> None:
    loop = asyncio.get_running_loop()
    over: asyncio.Future[None] = loop.create_future()
    over.set_result(None)
    held: asyncio.Future[None] = loop.create_future()
    holds = [over, held]
    pending = take_pending(holds)
    assert pending == [held] and holds == []
    loop.call_later(0.02, held.set_result, None)
    await asyncio.wait_for(wait_for_holds(pending), 1.0)
    assert held.done()
    await wait_for_holds([])  # nothing to wait for


async def test_a_disabled_gate_never_holds() -> None:
    figures = Figures()
    figures.ready = 10_000
    gate = FlowGate(figures, PublisherFlow(LIMITS), enabled=False)
    assert all(gate.hold() is None for _ in range(10))
    gate.check()  # nothing to release, nothing armed
    assert not gate.flow.holding


async def test_a_queue_follows_the_nodes_flow_setting() -> None:
    from logbroker.queue.queue_limits import QueueLimits
    from logbroker.queue.queue_shell import QueueSettings, QueueShell
    from segments.memory_filesystem import MemoryFileSystem

    fs = MemoryFileSystem()
    default = QueueShell.open(QueueSettings("/", "a", True, QueueLimits()), fs, "/a")
    off = QueueShell.open(QueueSettings("/", "b", True, QueueLimits(), publisher_flow=None),
                          fs, "/b")
    assert default.flow_gate.enabled and default.flow_gate.flow.limits == FlowLimits()
    assert not off.flow_gate.enabled
    await default.close()
    await off.close()
