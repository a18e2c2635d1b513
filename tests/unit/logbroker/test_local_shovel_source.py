"""A shovel's local source and URIs: `amqp://` is this broker, the source's credit bounds
the forwards in flight, and closing gives back what was not settled."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from logbroker.federation.local_source import LocalDelivery, LocalSource
from logbroker.message import Message
from logbroker.metadata.errors import MetadataError
from logbroker.metadata.shovel_parameters import local_vhost, validate_shovel
from logbroker.queue.delivery_sink import DeliverySink
from logbroker.queue.queue_type import QueueType


def test_an_uri_without_a_host_is_a_vhost_of_this_broker() -> None:
    assert local_vhost("amqp://") == "/"
    assert local_vhost("amqp:///") == "/"
    assert local_vhost("amqp:///%2F") == "/"
    assert local_vhost("amqp:///orders") == "orders"
    assert local_vhost("amqp://guest:guest@127.0.0.1:5672/%2F") is None
    assert local_vhost("amqps://") is None  # TLS to ourselves means a host


def test_local_uris_are_valid_at_either_end_and_a_bad_one_is_named() -> None:
    validate_shovel("s", {"src-uri": "amqp:///v", "src-queue": "q", "dest-uri": "amqp://"})
    with pytest.raises(MetadataError, match="src-uri"):
        validate_shovel("s", {"src-uri": "http://h", "src-queue": "q", "dest-uri": "amqp://"})


class FakeQueue:
    def __init__(self) -> None:
        self.acked: list[int] = []
        self.requeued: list[int] = []
        self.pumps = 0

    def ack(self, offsets: Sequence[int]) -> None:
        self.acked.extend(offsets)

    def reject(self, offsets: Sequence[int], requeue: bool) -> None:
        assert requeue
        self.requeued.extend(offsets)

    def schedule_pump(self) -> None:
        self.pumps += 1


class FakeBroker:
    def __init__(self) -> None:
        self.queue = FakeQueue()
        self.released: list[tuple[str, str]] = []

    async def consume_here(self, vhost: str, queue: str, sink: DeliverySink, *, no_ack: bool,
                           prefetch_count: int) -> tuple[str, QueueType]:
        return "ctag", self.queue  # type: ignore[return-value]

    def release_here(self, vhost: str, queue: str, consumer_tag: str,
                     channel_key: str) -> None:
        self.released.append((queue, consumer_tag))


async def test_credit_bounds_the_forwards_and_close_gives_back_the_rest() -> None:
    broker = FakeBroker()
    gate = asyncio.Event()

    async def forward(delivery: LocalDelivery) -> None:
        await gate.wait()
        delivery.ack()

    source = LocalSource(broker, "/", "q", prefetch=2, no_ack=False, forward=forward)
    await source.open()
    assert source.credit() == 0  # registered, not started: the shovel counts the queue
    source.start()
    assert source.credit() == 2
    for offset in (0, 1):
        source.deliver("q", "ctag", offset, False, Message("", "q", b"x"))
    assert source.credit() == 0  # the queue hands out no more until one is settled
    gate.set()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert broker.queue.acked == [0, 1] and source.credit() == 2
    gate.clear()
    source.deliver("q", "ctag", 2, False, Message("", "q", b"x"))
    source.close()
    await asyncio.sleep(0)
    assert broker.released == [("q", "ctag")]  # the broker requeues offset 2
    assert broker.queue.acked == [0, 1] and source.closed.result() == "closed"
    assert source.credit() == 0


async def test_a_cancelled_consumer_closes_the_source() -> None:
    source = LocalSource(FakeBroker(), "/", "q", prefetch=1, no_ack=True,
                         forward=lambda delivery: asyncio.sleep(0))
    await source.open()
    source.consumer_cancelled("q", "ctag", leader_moved=True)
    assert "leader moving" in source.closed.result()
