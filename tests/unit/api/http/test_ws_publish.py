"""PublishChain: it feeds the socket's ConnectionFlow, so the reader waits while a queue
holds its publishes back."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from api.connection_flow import ConnectionFlow
from api.http.ws_publish import PAUSE_AT, PublishChain
from logbroker.connections import ConnectionInfo, ConnectionRegistry
from logbroker.message import Message
from logbroker.publishing import PublishResult


class HoldingPublisher:
    """Confirms every message and hands each batch's caller one hold to wait on."""

    def __init__(self) -> None:
        self.hold: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def start_batch(self, _vhost: str, messages: list[Message],
                    holds: list[asyncio.Future[None]] | None = None,
                    publisher_id: str = "") -> asyncio.Future[list[PublishResult]]:
        assert holds is not None
        holds.append(self.hold)
        done: asyncio.Future[list[PublishResult]] = asyncio.get_running_loop().create_future()
        done.set_result([PublishResult(routed=True, confirmed=True) for _ in messages])
        return done


class Broker:
    def __init__(self) -> None:
        self.publisher = HoldingPublisher()
        self.connections = ConnectionRegistry()
        self.connections.add(ConnectionInfo("ws:1", "WebSocket", "127.0.0.1", 1, "guest", "/"))


class Outbox:
    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.room = True

    def has_room(self) -> bool:
        return self.room

    def push(self, frame: Any, _size: int) -> bool:
        self.sent.append(frame)
        return True


def show_state(broker: Broker, connection_id: str) -> Any:
    """What WsSession shows: the flow's state on the connection's info."""
    def show(state: str) -> None:
        info = broker.connections.get(connection_id)
        assert info is not None
        info.state = state
    return show


async def test_the_reader_waits_for_a_hold_and_goes_on_once_it_ends() -> None:
    broker, outbox = Broker(), Outbox()
    flow = ConnectionFlow(PAUSE_AT, on_state=show_state(broker, "ws:1"))
    chain = PublishChain(cast(Any, broker), "/", cast(Any, outbox), flow, "ws:1")
    info = broker.connections.get("ws:1")
    assert info is not None
    chain.submit(["a"], [Message("", "q", b"1")])
    await asyncio.sleep(0.01)  # the publish ran: its confirm is out, its hold taken
    assert outbox.sent[0]["ids"] == ["a"]
    reader = asyncio.ensure_future(flow.wait())
    await asyncio.sleep(0.01)
    assert not reader.done()
    assert info.state == "flow"  # as /api/connections shows it
    broker.publisher.hold.set_result(None)
    await asyncio.wait_for(reader, 1.0)
    assert info.state == "running"
    await asyncio.wait_for(flow.wait(), 1.0)  # a hold is waited for once


async def test_a_hold_met_by_a_frame_stops_the_very_next_read() -> None:
    """The reader asks for room right after handing over a frame, before any other
    task ran: the hold that frame's publish met already counts."""
    broker, outbox = Broker(), Outbox()
    flow = ConnectionFlow(PAUSE_AT)
    chain = PublishChain(cast(Any, broker), "/", cast(Any, outbox), flow, "ws:1")
    chain.submit(["a"], [Message("", "q", b"1")])
    reader = asyncio.ensure_future(flow.wait())
    await asyncio.sleep(0.01)
    assert not reader.done()  # the next frame is not read while the queue holds
    broker.publisher.hold.set_result(None)
    await asyncio.wait_for(reader, 1.0)
    assert outbox.sent[0]["ids"] == ["a"]


async def test_unanswered_frames_count_in_flight_until_their_answer_is_sent() -> None:
    broker, outbox = Broker(), Outbox()
    broker.publisher.hold.set_result(None)
    flow = ConnectionFlow(PAUSE_AT)
    chain = PublishChain(cast(Any, broker), "/", cast(Any, outbox), flow, "ws:1")
    chain.submit(["a", "b"], [Message("", "q", b"1"), "refused"])
    assert (flow.in_flight("frames"), flow.in_flight("messages")) == (1, 2)
    await asyncio.sleep(0.01)
    assert outbox.sent[0]["nacks"] == [{"id": "b", "reason": "refused"}]
    assert (flow.in_flight("frames"), flow.in_flight("messages")) == (0, 0)


async def test_answers_keep_frame_order_and_wait_while_the_outbox_is_full() -> None:
    broker, outbox = Broker(), Outbox()
    broker.publisher.hold.set_result(None)
    flow = ConnectionFlow(PAUSE_AT)
    chain = PublishChain(cast(Any, broker), "/", cast(Any, outbox), flow, "ws:1")
    outbox.room = False
    chain.submit(["a"], [Message("", "q", b"1")])
    chain.submit_error({"op": "error", "id": "b"})
    chain.submit(["c"], [Message("", "q", b"2")])
    await asyncio.sleep(0.01)
    assert outbox.sent == [] and flow.in_flight("frames") == 3
    outbox.room = True
    chain.resume()  # the outbox drained
    await asyncio.sleep(0.01)
    assert [frame.get("ids", frame.get("id")) for frame in outbox.sent] == [["a"], "b", ["c"]]
    assert flow.in_flight("frames") == 0
