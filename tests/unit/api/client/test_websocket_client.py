"""The WebSocket client parts against a scripted in-process server: batching and confirms,
reconnecting to another node, resuming a replay, error frames."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve

from api.client import AsyncClient, NotFound, OutgoingMessage, PublishResult

Script = Callable[[ServerConnection, int], Awaitable[None]]
DEAD = "http://127.0.0.1:9"  # discard port: nothing listens


@asynccontextmanager
async def server(script: Script) -> AsyncIterator[tuple[str, list[str]]]:
    """Run `script(socket, connection_number)` for each connection; yields (url, paths)."""
    paths: list[str] = []

    async def handler(socket: ServerConnection) -> None:
        assert socket.request is not None
        assert socket.request.headers["Authorization"] == "Basic Z3Vlc3Q6Z3Vlc3Q="
        paths.append(socket.request.path)
        await script(socket, len(paths))

    async with serve(handler, "127.0.0.1", 0) as running:
        port = next(iter(running.sockets)).getsockname()[1]
        yield f"http://127.0.0.1:{port}", paths


async def frame(socket: ServerConnection) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(await socket.recv())
    return data


async def send(socket: ServerConnection, **fields: Any) -> None:
    await socket.send(json.dumps(fields))


async def test_publisher_batches_frames_and_maps_confirms() -> None:
    sizes: list[int] = []

    async def confirm_all(socket: ServerConnection, _number: int) -> None:
        async for text in socket:
            messages = json.loads(text)["messages"]
            sizes.append(len(messages))
            ids = [m["id"] for m in messages if m["routing_key"] != "refused"]
            await send(socket, op="confirm", ids=ids,
                       unroutable=[m["id"] for m in messages if m["routing_key"] == "nowhere"],
                       nacks=[{"id": m["id"], "reason": "queue full"} for m in messages
                              if m["routing_key"] == "refused"])

    async with server(confirm_all) as (url, paths), AsyncClient(url) as client:
        async with client.publisher(max_batch=1000, max_in_flight=2) as publisher:
            futures = [await publisher.publish("", "q", f"m{i}") for i in range(2500)]
            await publisher.flush()
            assert all(f.result() == PublishResult(True, True) for f in futures)
            results = await publisher.publish_many([
                OutgoingMessage("nowhere", b"a"), OutgoingMessage("refused", b"\xff")])
        assert results == [PublishResult(False, True), PublishResult(False, False, "queue full")]
    assert sizes == [1000, 1000, 500, 2]
    assert paths == ["/ws?vhost=%2F"]


async def test_publisher_error_frame_refuses_the_named_message() -> None:
    async def refuse(socket: ServerConnection, _number: int) -> None:
        message = (await frame(socket))["messages"][0]
        await send(socket, op="error", code=404, reason="no exchange 'x'", ref=message["id"])

    async with server(refuse) as (url, _), AsyncClient(url) as client, \
            client.publisher() as publisher:
        [result] = await publisher.publish_many([OutgoingMessage("k", "v", exchange="x")])
    assert result == PublishResult(False, False, "no exchange 'x'")


async def test_consumer_reconnects_to_another_node_and_subscribes_again() -> None:
    async def deliver_then_drop(socket: ServerConnection, number: int) -> None:
        subscribe = await frame(socket)
        assert subscribe["op"] == "subscribe" and subscribe["prefetch"] == 5
        await send(socket, op="subscribed", consumer_tag="ctag")
        await send(socket, op="deliver", consumer_tag="ctag", delivery_tag=1, queue="q",
                   offset=number, redelivered=number > 1, exchange="", routing_key="q",
                   properties={}, payload=f"from connection {number}",
                   payload_encoding="string")
        if number == 1:
            await socket.close(1011, "node failing")
            return
        assert await frame(socket) == {"op": "ack", "delivery_tag": 1, "multiple": False}
        await send(socket, op="cancelled", consumer_tag="ctag")
        await socket.wait_closed()

    async with server(deliver_then_drop) as (url, paths), \
            AsyncClient(f"{DEAD},{url}", backoff_s=0.0) as client:
        bodies = []
        async with client.consume("q", prefetch=5) as consumer:
            async for delivery in consumer:
                bodies.append(delivery.body)
                assert await delivery.ack() is (delivery.offset == 2)
        assert consumer.reconnects == 1
    assert bodies == [b"from connection 1", b"from connection 2"]
    assert len(paths) == 2


async def test_following_replay_resumes_after_the_last_record() -> None:
    async def replay(socket: ServerConnection, number: int) -> None:
        request = await frame(socket)
        start = request["from_offset"] if number > 1 else 0
        assert number == 1 or request["from_offset"] == 2
        for offset in range(start, start + 2):
            await send(socket, op="record", subscription=request["subscription"],
                       offset=offset, timestamp=1, exchange="", routing_key="q",
                       properties={}, payload="cg==", payload_encoding="base64")
        if number == 1:
            await socket.close(1001, "going away")
            return
        await socket.wait_closed()

    async with server(replay) as (url, paths), AsyncClient(url, backoff_s=0.0) as client:
        offsets = [r.offset async for r in client.replay("q", from_timestamp=5, to_offset=4,
                                                          follow=True)]
    assert offsets == [0, 1, 2, 3]
    assert len(paths) == 2


async def test_subscribe_refused_raises_the_mapped_error() -> None:
    async def refuse(socket: ServerConnection, _number: int) -> None:
        await frame(socket)
        await send(socket, op="error", code=404, reason="no queue 'q' in vhost '/'")
        await socket.wait_closed()

    async with server(refuse) as (url, _), AsyncClient(url) as client:
        with pytest.raises(NotFound, match="no queue"):
            async with client.consume("q"):
                pass
