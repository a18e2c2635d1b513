"""The WebSocket endpoint /ws against a real broker: publish with confirms, consume, replay.

Every wait is bounded (`asyncio.wait_for`), so a protocol bug fails a test
instead of hanging it; each test uses its own queues.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.integration.conftest import BrokerProcess

WAIT_S = 5.0
QUIET_S = 0.4  # how long "nothing more arrives" is watched


def basic(user: str = "guest", password: str = "guest") -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@asynccontextmanager
async def client(broker: BrokerProcess, query: str = "vhost=%2F",
                 authorization: str | None = None) -> AsyncIterator[ClientConnection]:
    headers = {"Authorization": authorization or basic()}
    async with connect(f"{broker.ws_url}?{query}", additional_headers=headers,
                       open_timeout=WAIT_S, close_timeout=2) as ws:
        yield ws


async def send(ws: ClientConnection, frame: dict[str, Any]) -> None:
    await ws.send(json.dumps(frame))


async def recv(ws: ClientConnection, timeout: float = WAIT_S) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), timeout))
    return frame


async def recv_op(ws: ClientConnection, op: str) -> dict[str, Any]:
    frame = await recv(ws)
    assert frame["op"] == op, frame
    return frame


async def recv_many(ws: ClientConnection, op: str, count: int) -> list[dict[str, Any]]:
    return [await recv_op(ws, op) for _ in range(count)]


async def quiet(ws: ClientConnection) -> None:
    """Nothing arrives for a while."""
    with pytest.raises(TimeoutError):
        frame = await recv(ws, QUIET_S)
        pytest.fail(f"unexpected frame {frame}")


def new_queue(http: httpx.Client, prefix: str, **arguments: Any) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    answer = http.put(f"/api/queues/%2F/{name}", json={"durable": True, "arguments": arguments})
    assert answer.status_code == 201, answer.text
    return name


def messages(queue: str, bodies: list[str], id_prefix: str = "m") -> list[dict[str, Any]]:
    return [{"id": f"{id_prefix}{i}", "exchange": "", "routing_key": queue, "payload": body,
             "payload_encoding": "string"} for i, body in enumerate(bodies)]


async def publish(ws: ClientConnection, queue: str, bodies: list[str],
                  id_prefix: str = "m") -> dict[str, Any]:
    await send(ws, {"op": "publish", "messages": messages(queue, bodies, id_prefix)})
    confirm = await recv_op(ws, "confirm")
    assert confirm["nacks"] == [], confirm
    return confirm


async def subscribe(ws: ClientConnection, queue: str, **fields: Any) -> str:
    await send(ws, {"op": "subscribe", "queue": queue, **fields})
    tag: str = (await recv_op(ws, "subscribed"))["consumer_tag"]
    return tag


def queue_view(http: httpx.Client, queue: str) -> dict[str, Any]:
    view: dict[str, Any] = http.get(f"/api/queues/%2F/{queue}").json()
    return view


# -- publishing -----------------------------------------------------------------------------


async def test_batch_publish_is_confirmed_in_order(broker: BrokerProcess,
                                                   http: httpx.Client) -> None:
    queue = new_queue(http, "ws-confirm")
    batch = messages(queue, [f"body {i}" for i in range(200)])
    batch.insert(100, {"id": "lost", "routing_key": f"nowhere-{uuid.uuid4().hex}",
                       "payload": "x"})
    async with client(broker) as ws:
        await send(ws, {"op": "publish", "messages": batch})
        await send(ws, {"op": "publish", "id": 7, "routing_key": queue, "payload": "single"})
        await send(ws, {"op": "publish", "messages": messages(queue, ["a", "b"], "late")})
        first = await recv_op(ws, "confirm")
        assert first["ids"] == [m["id"] for m in batch]
        assert first["unroutable"] == ["lost"]
        assert first["nacks"] == []
        assert (await recv_op(ws, "confirm"))["ids"] == [7]
        assert (await recv_op(ws, "confirm"))["ids"] == ["late0", "late1"]
    assert queue_view(http, queue)["messages"] == 203


async def test_many_frames_in_flight_are_answered_in_order(broker: BrokerProcess,
                                                           http: httpx.Client) -> None:
    queue = new_queue(http, "ws-frames")
    async with client(broker) as ws:
        for frame in range(50):
            await send(ws, {"op": "publish",
                            "messages": messages(queue, ["x"] * 20, f"f{frame}-")})
        for frame in range(50):
            confirm = await recv_op(ws, "confirm")
            assert confirm["ids"] == [f"f{frame}-{i}" for i in range(20)]
    assert queue_view(http, queue)["messages"] == 1000


async def test_reject_publish_overflow_gives_nacks(broker: BrokerProcess,
                                                   http: httpx.Client) -> None:
    queue = new_queue(http, "ws-overflow", **{"x-max-length": 3, "x-overflow": "reject-publish"})
    async with client(broker) as ws:
        await send(ws, {"op": "publish", "messages": messages(queue, list("abcdef"))})
        confirm = await recv_op(ws, "confirm")
    assert confirm["ids"] == ["m0", "m1", "m2"]
    assert [nack["id"] for nack in confirm["nacks"]] == ["m3", "m4", "m5"]
    assert all(nack["reason"] for nack in confirm["nacks"])
    assert queue_view(http, queue)["messages"] == 3


async def test_bad_message_is_nacked_alone(broker: BrokerProcess, http: httpx.Client) -> None:
    queue = new_queue(http, "ws-badmsg")
    batch = messages(queue, ["a", "b", "c"])
    batch[1]["payload_encoding"] = "rot13"
    batch[2]["exchange"] = "no-such-exchange"
    async with client(broker) as ws:
        await send(ws, {"op": "publish", "messages": batch})
        confirm = await recv_op(ws, "confirm")
    assert confirm["ids"] == ["m0"]
    assert [nack["id"] for nack in confirm["nacks"]] == ["m1", "m2"]
    assert "payload_encoding" in confirm["nacks"][0]["reason"]
    assert "no-such-exchange" in confirm["nacks"][1]["reason"]


# -- consuming ------------------------------------------------------------------------------


async def test_prefetch_bounds_unacked_deliveries(broker: BrokerProcess,
                                                  http: httpx.Client) -> None:
    queue = new_queue(http, "ws-prefetch")
    async with client(broker) as ws:
        await publish(ws, queue, [f"m{i}" for i in range(20)])
        await subscribe(ws, queue, prefetch=5)
        first = await recv_many(ws, "deliver", 5)
        await quiet(ws)
        assert [d["payload"] for d in first] == [f"m{i}" for i in range(5)]
        await send(ws, {"op": "ack", "delivery_tag": first[0]["delivery_tag"]})
        one_more = await recv_op(ws, "deliver")
        assert one_more["payload"] == "m5"
        await quiet(ws)
        seen = [*first, one_more]
        while len(seen) < 20:
            await send(ws, {"op": "ack", "delivery_tag": seen[-1]["delivery_tag"],
                            "multiple": True})
            batch = await recv_many(ws, "deliver", min(5, 20 - len(seen)))
            await quiet(ws)
            seen += batch
        assert [d["payload"] for d in seen] == [f"m{i}" for i in range(20)]
        assert not any(d["redelivered"] for d in seen)
        assert seen[0]["queue"] == queue and seen[0]["offset"] == 0


async def test_deliveries_beyond_the_outbox_high_water_mark(broker: BrokerProcess,
                                                             http: httpx.Client) -> None:
    """More deliveries than the outbox holds: the queue stops, then resumes as it drains."""
    queue = new_queue(http, "ws-flow")
    bodies = [f"{i:04d}" + "y" * 2000 for i in range(1500)]
    async with client(broker) as ws:
        for start in range(0, len(bodies), 500):
            await publish(ws, queue, bodies[start:start + 500], f"p{start}-")
        await subscribe(ws, queue, prefetch=0, no_ack=True)
        deliveries = await recv_many(ws, "deliver", len(bodies))
        await quiet(ws)
        assert [d["offset"] for d in deliveries] == list(range(len(bodies)))
        assert [d["delivery_tag"] for d in deliveries] == list(range(1, len(bodies) + 1))
        await send(ws, {"op": "replay", "queue": queue, "from_offset": 0})
        records = await recv_many(ws, "record", len(bodies))
        assert [r["payload"] for r in records] == bodies
        assert (await recv_op(ws, "caught_up"))["next_offset"] == len(bodies)
    assert queue_view(http, queue)["messages"] == 0


async def test_ack_multiple_settles_up_to_the_tag(broker: BrokerProcess,
                                                  http: httpx.Client) -> None:
    queue = new_queue(http, "ws-ackmulti")
    async with client(broker) as ws:
        await publish(ws, queue, [f"m{i}" for i in range(10)])
        await subscribe(ws, queue, prefetch=10)
        deliveries = await recv_many(ws, "deliver", 10)
        await send(ws, {"op": "ack", "delivery_tag": deliveries[5]["delivery_tag"],
                        "multiple": True})
        # Acked tags are gone: acking one again is an error naming it.
        await send(ws, {"op": "ack", "delivery_tag": deliveries[2]["delivery_tag"]})
        error = await recv_op(ws, "error")
        assert error["ref"] == deliveries[2]["delivery_tag"]
    async with client(broker) as ws:
        await subscribe(ws, queue, prefetch=10)
        again = await recv_many(ws, "deliver", 4)
        await quiet(ws)
    assert [d["payload"] for d in again] == ["m6", "m7", "m8", "m9"]
    assert all(d["redelivered"] for d in again)


async def test_nack_with_requeue_redelivers(broker: BrokerProcess, http: httpx.Client) -> None:
    queue = new_queue(http, "ws-nack")
    async with client(broker) as ws:
        await publish(ws, queue, ["only"])
        await subscribe(ws, queue, prefetch=1)
        first = await recv_op(ws, "deliver")
        assert first["redelivered"] is False
        await send(ws, {"op": "nack", "delivery_tag": first["delivery_tag"], "requeue": True})
        again = await recv_op(ws, "deliver")
        assert again["redelivered"] is True
        assert (again["offset"], again["payload"]) == (first["offset"], "only")
        assert again["delivery_tag"] > first["delivery_tag"]


async def test_reject_without_requeue_drops(broker: BrokerProcess, http: httpx.Client) -> None:
    queue = new_queue(http, "ws-reject")
    async with client(broker) as ws:
        await publish(ws, queue, ["dropped", "kept"])
        await subscribe(ws, queue, prefetch=1)
        first = await recv_op(ws, "deliver")
        await send(ws, {"op": "reject", "delivery_tag": first["delivery_tag"],
                        "requeue": False})
        second = await recv_op(ws, "deliver")
        assert (second["payload"], second["redelivered"]) == ("kept", False)
        await send(ws, {"op": "ack", "delivery_tag": second["delivery_tag"]})
        await quiet(ws)
    assert queue_view(http, queue)["messages"] == 0


async def test_unacked_go_to_another_client_on_disconnect(broker: BrokerProcess,
                                                          http: httpx.Client) -> None:
    queue = new_queue(http, "ws-disconnect")
    async with client(broker) as ws:
        await publish(ws, queue, ["a", "b", "c"])
        await subscribe(ws, queue, prefetch=10)
        taken = await recv_many(ws, "deliver", 3)
        assert not any(d["redelivered"] for d in taken)
    async with client(broker) as other:
        await subscribe(other, queue)
        again = await recv_many(other, "deliver", 3)
    assert [d["payload"] for d in again] == ["a", "b", "c"]
    assert all(d["redelivered"] for d in again)


async def test_cancel_and_queue_deletion(broker: BrokerProcess, http: httpx.Client) -> None:
    queue, doomed = new_queue(http, "ws-cancel"), new_queue(http, "ws-doomed")
    async with client(broker) as ws:
        tag = await subscribe(ws, queue, consumer_tag="mine")
        assert tag == "mine"
        await send(ws, {"op": "cancel", "consumer_tag": "mine"})
        assert (await recv_op(ws, "cancelled"))["consumer_tag"] == "mine"
        await publish(ws, queue, ["after cancel"])
        await quiet(ws)
        doomed_tag = await subscribe(ws, doomed)
        await send(ws, {"op": "replay", "queue": doomed, "follow": True, "subscription": "d"})
        assert (await recv_op(ws, "caught_up"))["next_offset"] == 0
        assert http.delete(f"/api/queues/%2F/{doomed}").status_code == 204
        ends = sorted([await recv(ws), await recv(ws)], key=lambda frame: str(frame["op"]))
        assert ends == [{"op": "cancelled", "consumer_tag": doomed_tag},
                        {"op": "replay_stopped", "subscription": "d", "reason": "queue deleted"}]


# -- replay ---------------------------------------------------------------------------------


async def test_replay_then_follow(broker: BrokerProcess, http: httpx.Client) -> None:
    queue = new_queue(http, "ws-follow")
    async with client(broker) as ws, client(broker) as publisher:
        await publish(publisher, queue, [f"m{i}" for i in range(10)])
        await send(ws, {"op": "replay", "queue": queue, "from_offset": 0, "follow": True,
                        "subscription": "s1"})
        records = await recv_many(ws, "record", 10)
        assert [(r["offset"], r["payload"]) for r in records] == \
            [(i, f"m{i}") for i in range(10)]
        assert all(r["subscription"] == "s1" and r["timestamp"] > 0 for r in records)
        caught_up = await recv_op(ws, "caught_up")
        assert (caught_up["subscription"], caught_up["next_offset"]) == ("s1", 10)
        await publish(publisher, queue, [f"n{i}" for i in range(5)])
        more = await recv_many(ws, "record", 5)
        assert [(r["offset"], r["payload"]) for r in more] == \
            [(10 + i, f"n{i}") for i in range(5)]
        await send(ws, {"op": "stop_replay", "subscription": "s1"})
        assert (await recv_op(ws, "replay_stopped"))["subscription"] == "s1"
        await publish(publisher, queue, ["unseen"])
        await quiet(ws)


async def test_replay_reads_consumed_messages(broker: BrokerProcess,
                                              http: httpx.Client) -> None:
    queue = new_queue(http, "ws-replay-acked")
    async with client(broker) as ws:
        await publish(ws, queue, [f"m{i}" for i in range(5)])
        tag = await subscribe(ws, queue)
        deliveries = await recv_many(ws, "deliver", 5)
        await send(ws, {"op": "ack", "delivery_tag": deliveries[-1]["delivery_tag"],
                        "multiple": True})
        await send(ws, {"op": "cancel", "consumer_tag": tag})
        await recv_op(ws, "cancelled")
        assert queue_view(http, queue)["messages"] == 0
        await send(ws, {"op": "replay", "queue": queue, "from_offset": 1, "to_offset": 4})
        records = await recv_many(ws, "record", 3)
        assert [r["payload"] for r in records] == ["m1", "m2", "m3"]
        caught_up = await recv_op(ws, "caught_up")
        assert caught_up["next_offset"] == 4
        await send(ws, {"op": "replay", "queue": queue, "from_offset": 0})
        records = await recv_many(ws, "record", 5)
        assert [r["payload"] for r in records] == [f"m{i}" for i in range(5)]
        assert (await recv_op(ws, "caught_up"))["next_offset"] == 5
        await quiet(ws)
    assert queue_view(http, queue)["messages"] == 0


# -- errors and authentication --------------------------------------------------------------


async def test_bad_frames_get_errors_and_the_socket_stays_usable(
        broker: BrokerProcess, http: httpx.Client) -> None:
    queue = new_queue(http, "ws-errors")
    async with client(broker) as ws:
        await ws.send("this is not json")
        assert (await recv_op(ws, "error"))["code"] == 400
        await send(ws, {"op": "frobnicate", "id": "f1"})
        error = await recv_op(ws, "error")
        assert (error["code"], error["ref"]) == (400, "f1")
        await send(ws, {"op": "subscribe"})
        assert (await recv_op(ws, "error"))["field"] == "queue"
        await send(ws, {"op": "subscribe", "queue": "no-such-queue", "prefetch": 1})
        assert (await recv_op(ws, "error"))["code"] == 404
        await send(ws, {"op": "subscribe", "queue": queue, "prefetch": -1})
        assert (await recv_op(ws, "error"))["field"] == "prefetch"
        await send(ws, {"op": "ack", "delivery_tag": 999})
        error = await recv_op(ws, "error")
        assert (error["code"], error["ref"]) == (400, 999)
        await send(ws, {"op": "publish", "messages": [{"payload": "no id"}]})
        assert (await recv_op(ws, "error"))["field"] == "messages.0.id"
        await send(ws, {"op": "replay", "queue": queue, "from_offset": 0, "from_timestamp": 1})
        assert (await recv_op(ws, "error"))["code"] == 400
        await ws.send(b"\x00binary")
        assert (await recv_op(ws, "error"))["code"] == 400
        await ws.send(json.dumps([1, 2, 3]))
        assert (await recv_op(ws, "error"))["code"] == 400
        confirm = await publish(ws, queue, ["still works"])
        assert confirm["ids"] == ["m0"]


async def test_bad_auth_closes_with_4401(broker: BrokerProcess) -> None:
    for query, authorization in [("vhost=%2F", basic("guest", "wrong")),
                                 ("vhost=%2F", "Bearer nonsense"),
                                 ("user=guest&password=nope", "Basic !!")]:
        async with client(broker, query, authorization) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await recv(ws)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401


async def test_unknown_vhost_closes_with_4403(broker: BrokerProcess) -> None:
    async with client(broker, "vhost=no-such-vhost") as ws:
        with pytest.raises(ConnectionClosed) as closed:
            await recv(ws)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403


async def test_query_credentials_and_connection_listing(broker: BrokerProcess,
                                                        http: httpx.Client) -> None:
    headers: dict[str, str] = {}
    url = f"{broker.ws_url}?user=guest&password=guest"
    async with connect(url, additional_headers=headers, open_timeout=WAIT_S) as ws:
        await send(ws, {"op": "cancel", "consumer_tag": "nothing"})
        assert (await recv_op(ws, "cancelled"))["consumer_tag"] == "nothing"
        listed = [c for c in http.get("/api/connections").json()
                  if c.get("protocol") == "WebSocket"]
        assert listed, http.get("/api/connections").json()
