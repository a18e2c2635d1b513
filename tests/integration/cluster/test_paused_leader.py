"""SIGSTOP of a replicated queue's leader under load: safety and how soon consumers move.

A 3-node cluster and one durable queue with three replicas, led by the node (L)
that is also the Raft leader (the controller): the worst case, since a node that
believes it leads the Raft group never isolates itself. A publisher with confirms
and a consumer with manual acks (prefetch 20, acking slowly, so the queue keeps a
backlog on L) are connected to another node (Y): both are forwarded to L. Then L
is paused (SIGSTOP) for `PAUSE_S`; once the metadata names a new leader (Z), a
second consumer connects to Z directly, as a client that reconnected elsewhere
would, and acks quickly. L is resumed (SIGCONT), the load goes on for `AFTER_S`,
the publisher stops and the consumers drain the queue.

Checked:
- no confirmed message is lost and nothing is delivered that was not published;
- a delivery of a body delivered before is flagged redelivered (per body, in the
  order the clients got them; both consumers run on one event loop): L, resumed,
  must not deliver what Z delivered and a client acked meanwhile, unflagged;
- Y's consumer gets a delivery within `MOVE_WITHIN_S` of the election, while L is
  still paused (then it can only come from Z): the consumer follows the new
  leader as soon as the metadata says so, not once the link to L breaks.

Bounds: every wait has a timeout; the whole run is about 30-40 s; L is resumed
and every node stopped in `finally`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aio_pika
import aio_pika.exceptions
import httpx
import pytest
from aio_pika.abc import AbstractIncomingMessage

from tests.integration.cluster.cluster_nodes import Node, leader_of, running_cluster
from tests.integration.conftest import wait_for

AUTH = ("guest", "guest")
QUEUE = "paused-leader"
REPLICATED: dict[str, Any] = {"x-queue-replicas": 3, "x-queue-leader-locator": "client-local"}
PRELOAD = 400  # confirmed before the consumers start: L's backlog when it is paused
PREFETCH = 20
SLOW_ACK_S = 0.01  # Y's consumer, so that a backlog stays
RUN_BEFORE_S = 1.5  # load before the pause
PAUSE_S = 6.0
AFTER_S = 4.0  # load after the resume
PUBLISH_PAUSE_S = 0.02
PUBLISH_TIMEOUT_S = 3.0  # a publish not confirmed by then counts as unconfirmed
MOVE_WITHIN_S = 5.0
ELECTION_TIMEOUT_S = PAUSE_S - 0.5
DRAIN_TIMEOUT_S = 20.0


@dataclass
class Record:
    published: set[bytes] = field(default_factory=set)
    confirmed: set[bytes] = field(default_factory=set)
    # (monotonic time, consumer, body, redelivered) in the order the clients got them
    deliveries: list[tuple[float, str, bytes, bool]] = field(default_factory=list)
    acked: set[bytes] = field(default_factory=set)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[Node]]:
    with running_cluster(tmp_path) as nodes:
        yield nodes


def queue_view(node: Node) -> dict[str, object] | None:
    try:
        reply = httpx.get(f"{node.url}/api/queues/%2F/{QUEUE}", auth=AUTH, timeout=2.0)
    except httpx.HTTPError:
        return None
    return dict(reply.json()) if reply.status_code == 200 else None


def in_sync(node: Node) -> bool:
    view = queue_view(node)
    return view is not None and len(list(view["in_sync"])) == 3  # type: ignore[call-overload]


async def connect(node: Node) -> aio_pika.abc.AbstractConnection:
    return await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{node.amqp_port}/",
                                  timeout=10)


async def publish(channel: aio_pika.abc.AbstractChannel, record: Record, body: bytes) -> None:
    record.published.add(body)
    try:
        await asyncio.wait_for(channel.default_exchange.publish(
            aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
            routing_key=QUEUE, mandatory=True), PUBLISH_TIMEOUT_S)
    except (TimeoutError, aio_pika.exceptions.DeliveryError,
            aio_pika.exceptions.PublishError):
        return  # not confirmed: it may or may not exist
    record.confirmed.add(body)


async def publisher(node: Node, record: Record, stop: asyncio.Event) -> None:
    connection = await connect(node)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        for number in range(100_000):  # ends on `stop` long before
            if stop.is_set():
                return
            await publish(channel, record, f"live-{number}".encode())
            await asyncio.sleep(PUBLISH_PAUSE_S)


async def consume(node: Node, name: str, record: Record, ack_delay_s: float,
                  stop: asyncio.Event) -> None:
    connection = await connect(node)
    async with connection:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=PREFETCH)
        queue = await channel.get_queue(QUEUE, ensure=False)
        one_at_a_time = asyncio.Lock()  # aio-pika runs callbacks concurrently

        async def on_message(message: AbstractIncomingMessage) -> None:
            record.deliveries.append((time.monotonic(), name, message.body,
                                      bool(message.redelivered)))
            async with one_at_a_time:
                if ack_delay_s:
                    await asyncio.sleep(ack_delay_s)
                await message.ack()
            record.acked.add(message.body)

        await queue.consume(on_message)
        await stop.wait()


async def leader_now(node: Node) -> str | None:
    view = await asyncio.to_thread(queue_view, node)
    return None if view is None else str(view["leader"])


async def scenario(leader: Node, client: Node, other: Node, record: Record
                   ) -> tuple[float, float, str]:
    """Runs the load and the pause; (election time, resume time, new leader's name)."""
    stop, stop_publishing = asyncio.Event(), asyncio.Event()
    by_name = {node.name: node for node in (leader, client, other)}
    tasks = [asyncio.ensure_future(publisher(client, record, stop_publishing)),
             asyncio.ensure_future(consume(client, "forwarded", record, SLOW_ACK_S, stop))]
    try:
        await asyncio.sleep(RUN_BEFORE_S)
        leader.pause()
        paused_at = time.monotonic()
        elected_at, new_leader = 0.0, ""
        while time.monotonic() - paused_at < ELECTION_TIMEOUT_S:
            name = await leader_now(other)
            if name is not None and name != leader.name:
                elected_at, new_leader = time.monotonic(), name
                break
            await asyncio.sleep(0.05)
        if new_leader:  # a client that reconnected to the new leader
            tasks.append(asyncio.ensure_future(
                consume(by_name[new_leader], "direct", record, 0.0, stop)))
        await asyncio.sleep(max(0.0, paused_at + PAUSE_S - time.monotonic()))
        leader.resume()
        resumed_at = time.monotonic()
        assert new_leader, f"no new leader within {ELECTION_TIMEOUT_S} s of the pause"
        await asyncio.sleep(AFTER_S)
        stop_publishing.set()
        await asyncio.wait_for(tasks[0], PUBLISH_TIMEOUT_S + 5)
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while time.monotonic() < deadline and not record.confirmed <= record.acked:
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # late duplicates, if any, show up here
        return elected_at, resumed_at, new_leader
    finally:
        leader.resume()
        stop.set()
        stop_publishing.set()
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def preload(node: Node, record: Record) -> None:
    async def run() -> None:
        connection = await connect(node)
        async with connection:
            channel = await connection.channel(publisher_confirms=True)
            await channel.declare_queue(QUEUE, durable=True, arguments=REPLICATED)
            bodies = [f"pre-{number}".encode() for number in range(PRELOAD)]
            record.published.update(bodies)
            results = await asyncio.gather(*(channel.default_exchange.publish(
                aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                routing_key=QUEUE) for body in bodies), return_exceptions=True)
            record.confirmed.update(body for body, result in zip(bodies, results, strict=True)
                                    if not isinstance(result, BaseException))
    asyncio.run(run())


def test_a_paused_leader_neither_redelivers_unflagged_nor_keeps_its_consumers(
        cluster: list[Node]) -> None:
    leader = leader_of(cluster)  # the Raft leader too: it does not isolate itself
    client, controller = [node for node in cluster if node is not leader]
    record = Record()
    try:
        preload(leader, record)  # declared on L: client-local makes it the leader
        assert len(record.confirmed) == PRELOAD
        wait_for(lambda: in_sync(leader), "every replica in sync", 15.0)
        elected_at, resumed_at, new_leader = asyncio.run(
            scenario(leader, client, controller, record))
    finally:
        leader.resume()

    first_seen: dict[bytes, int] = {}
    unflagged: list[tuple[bytes, str]] = []
    for index, (_, consumer, body, redelivered) in enumerate(record.deliveries):
        if body in first_seen and not redelivered:
            unflagged.append((body, consumer))
        first_seen.setdefault(body, index)
    lost = record.confirmed - set(first_seen)
    unexpected = set(first_seen) - record.published
    moved = [at for at, consumer, _, _ in record.deliveries
             if consumer == "forwarded" and elected_at <= at < resumed_at]
    gap = moved[0] - elected_at if moved else float("inf")
    per_consumer = {name: sum(1 for d in record.deliveries if d[1] == name)
                    for name in ("forwarded", "direct")}
    print(f"deliveries {len(record.deliveries)} {per_consumer}, flagged "
          f"{sum(1 for d in record.deliveries if d[3])}, confirmed {len(record.confirmed)}, "
          f"lost {len(lost)}, unexpected {len(unexpected)}, unflagged duplicates "
          f"{len(unflagged)}, new leader {new_leader}, forwarded consumer's first delivery "
          f"{gap:.2f} s after the election")
    assert not lost, f"confirmed but never delivered: {sorted(lost)[:10]}"
    assert not unexpected, f"delivered but never published: {sorted(unexpected)[:10]}"
    assert not unflagged, f"delivered again with redelivered=false: {unflagged[:10]}"
    assert gap < MOVE_WITHIN_S, (
        f"the forwarded consumer got nothing from the new leader {new_leader} within "
        f"{MOVE_WITHIN_S} s of its election (or before the old leader resumed)")

