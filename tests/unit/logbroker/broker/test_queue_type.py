"""The one queue interface (`QueueType`): each kind says what it is through
`capabilities()`, and a queue on this node answers the interface's calls (consume,
cancel, dequeue, purge, stats) the way the broker's callers rely on."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

import pytest
from pamqp import commands

from logbroker.broker import Broker
from logbroker.broker_config import BrokerConfig, Session
from logbroker.cluster.remote_queue import RemoteQueue, RemoteQueueRegistry
from logbroker.errors import BrokerError
from logbroker.message import Message
from logbroker.queue.consumers import Consumer
from logbroker.queue.queue_limits import QueueLimits
from logbroker.queue.queue_shell import QueueSettings, QueueShell
from logbroker.queue.queue_type import QueueKind, QueueType
from logbroker.queue.replica_setup import ReplicaSetup
from segments.memory_filesystem import MemoryFileSystem

from .test_broker_flow import RecordingSink, persistent, publish

SESSION = Session("conn-1", "guest", "/")
MEMBERS = ("n1", "n2", "n3")


async def test_each_kind_of_queue_says_what_it_is() -> None:
    settings = QueueSettings(vhost="/", name="q", durable=True, limits=QueueLimits())
    local = QueueShell.open(settings, MemoryFileSystem(), "/q")
    leader = QueueShell.open(settings, MemoryFileSystem(), "/r",
                             ReplicaSetup("n1", 1, MEMBERS, MEMBERS))
    forwarded = RemoteQueue(cast(RemoteQueueRegistry, None), "/", "q", "n2")
    kinds = {queue.capabilities().kind for queue in (local, leader, forwarded)}
    assert kinds == {QueueKind.LOCAL, QueueKind.REPLICATED_LEADER, QueueKind.FORWARDED}
    assert local.capabilities().runs_here and not local.capabilities().replicated
    assert leader.capabilities().runs_here and leader.capabilities().replicated
    assert not forwarded.capabilities().runs_here and not forwarded.capabilities().replay
    for queue in (local, leader, forwarded):  # every kind takes every queue argument
        assert "x-max-priority" in queue.capabilities().queue_arguments
        assert "x-priority" in queue.capabilities().consumer_arguments
    await local.close()
    await leader.close()


@pytest.fixture
async def broker(tmp_path: Path) -> Broker:
    return Broker.open(BrokerConfig(data_dir=str(tmp_path)))


async def test_a_local_queue_answers_the_interface(broker: Broker) -> None:
    await broker.definitions.declare_queue(SESSION, "q", durable=True)
    for index in range(3):
        assert await publish(broker, "", "q", persistent(f"m{index}".encode()))
    queue: QueueType | None = broker.endpoint("/", "q")
    assert queue is not None
    stats = await queue.stats()
    assert (stats.messages, stats.consumers, stats.first_offset, stats.end_offset) == (3, 0, 0, 3)
    got = await queue.dequeue("conn-1:1", no_ack=False)
    assert got is not None and (got.offset, got.redelivered, got.messages_left) == (0, False, 2)
    assert got.message.body == b"m0"
    assert await queue.purge() == 2  # the ready ones, not the one held unacked
    queue.reject([got.offset], requeue=True)
    assert (await queue.stats()).messages == 1
    await broker.close()


async def test_an_exclusive_consumer_is_refused_as_access_refused(broker: Broker) -> None:
    await broker.definitions.declare_queue(SESSION, "solo")
    queue = broker.endpoint("/", "solo")
    assert queue is not None
    await queue.consume(Consumer("a", "conn-1:1", exclusive=True), RecordingSink())
    with pytest.raises(BrokerError, match="in exclusive use") as refused:
        await queue.consume(Consumer("b", "conn-1:2"), RecordingSink("conn-1:2"))
    assert refused.value.reply_code == 403
    await broker.close()


async def test_an_auto_delete_queue_goes_with_its_last_consumer_only(broker: Broker) -> None:
    await broker.definitions.declare_queue(SESSION, "temp", auto_delete=True)
    queue = broker.endpoint("/", "temp")
    assert queue is not None
    queue.cancel("nobody")  # no consumer came yet: the queue stays
    await broker.settle()
    assert broker.state.queue("/", "temp") is not None
    await broker.consuming.consume(SESSION, "temp", RecordingSink(), consumer_tag="c1")
    await broker.consuming.consume(SESSION, "temp", RecordingSink("conn-1:2"),
                                   consumer_tag="c2")
    broker.consuming.cancel(SESSION, "temp", "c1")
    await broker.settle()
    assert broker.state.queue("/", "temp") is not None  # c2 still consumes
    broker.consuming.channel_closed("/", "conn-1:2", {"temp"})
    await asyncio.sleep(0)
    await broker.settle()
    assert broker.state.queue("/", "temp") is None
    await broker.close()


async def test_a_redeclare_restarts_the_idle_timer_and_counts(broker: Broker) -> None:
    await broker.definitions.declare_queue(SESSION, "idle", arguments={"x-expires": 60_000})
    assert await publish(broker, "", "idle", Message("", "idle", b"x",
                                                     commands.Basic.Properties()))
    name, messages, consumers = await broker.definitions.declare_queue(
        SESSION, "idle", arguments={"x-expires": 60_000})
    assert (name, messages, consumers) == ("idle", 1, 0)
    await broker.close()
