"""ConnectionFlow: one answer to "may the reader read?", fed by in-flight counts, queue
holds, resource alarms and the connection's output."""

from __future__ import annotations

import asyncio

from api.connection_flow import ConnectionFlow


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_in_flight_pauses_the_reader_at_its_limit_until_answers_come_back() -> None:
    flow = ConnectionFlow({"frames": 2, "messages": 10})
    flow.add("frames", 1)
    flow.add("messages", 9)
    assert flow.reasons() == ()
    flow.add("messages", 1)
    assert flow.reasons() == ("in_flight",)
    reader = asyncio.ensure_future(flow.wait())
    await settle()
    assert not reader.done()
    flow.remove("messages", 1)
    assert await asyncio.wait_for(reader, 1.0) is True
    assert (flow.in_flight("frames"), flow.in_flight("messages")) == (1, 9)


async def test_a_hold_is_flow_while_waited_and_is_waited_for_once() -> None:
    states: list[str] = []
    flow = ConnectionFlow({"bytes": 100}, on_state=states.append)
    hold: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    flow.holds.append(hold)
    assert flow.reasons() == ("flow",)
    reader = asyncio.ensure_future(flow.wait())
    await settle()
    assert not reader.done() and states == ["flow"]
    hold.set_result(None)
    assert await asyncio.wait_for(reader, 1.0) is True
    assert states == ["flow", "running"] and flow.holds == []
    assert flow.reasons() == ()


async def test_an_alarm_blocks_only_a_connection_that_published() -> None:
    states: list[str] = []
    flow = ConnectionFlow({"bytes": 100}, on_state=states.append)
    flow.alarm(True)
    assert flow.reasons() == ()
    assert await asyncio.wait_for(flow.wait(), 1.0) is True  # never published: read on
    flow.published()
    assert flow.reasons() == ("blocked",)
    reader = asyncio.ensure_future(flow.wait())
    await settle()
    assert not reader.done() and states == ["blocked"]
    flow.alarm(False)
    assert await asyncio.wait_for(reader, 1.0) is True
    assert states == ["blocked", "running"]


async def test_congested_output_is_waited_out_last_and_can_end_the_reading() -> None:
    congested = [True]
    drained: list[str] = []

    async def output_room() -> bool:
        drained.append("drained")
        return False  # the connection can send no more

    flow = ConnectionFlow({"bytes": 100}, lambda: congested[0], output_room)
    assert flow.reasons() == ("output",)
    assert await flow.wait() is False and drained == ["drained"]
    congested[0] = False
    assert await flow.wait() is True and drained == ["drained"]  # not asked when not needed


async def test_close_wakes_every_waiter_and_holds_nothing_back() -> None:
    flow = ConnectionFlow({"bytes": 1})
    flow.add("bytes", 5)
    in_flight = asyncio.ensure_future(flow.wait())
    other = ConnectionFlow({"bytes": 1})
    other.published()
    other.alarm(True)
    blocked = asyncio.ensure_future(other.wait())
    await settle()
    assert not in_flight.done() and not blocked.done()
    flow.close()
    other.close()
    assert await asyncio.wait_for(in_flight, 1.0) is False
    assert await asyncio.wait_for(blocked, 1.0) is False
    assert flow.reasons() == () and other.reasons() == ()
