"""`Consuming` and `Definitions` over their narrow collaborators: the metadata, access
control, and queues reached only through the queue interface (a fake one here)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from logbroker.access_control import AccessControl
from logbroker.broker_config import BrokerConfig, Session
from logbroker.consuming import Consuming
from logbroker.definitions import Definitions
from logbroker.definitions_loaded import DefinitionsLoaded
from logbroker.errors import NOT_FOUND, BrokerError
from logbroker.metadata import (
    Applied,
    Command,
    DeclareQueue,
    DeleteQueue,
    MetadataState,
    bootstrap_commands,
    hash_password,
)
from logbroker.queue.consumers import Consumer
from logbroker.queue.delivery_sink import DeliverySink
from logbroker.queue.queue_type import FORWARDED, Capabilities, Dequeued, QueueStats

SESSION = Session("conn-1", "guest", "/")


@dataclass
class FakeQueue:
    """A queue of any kind, as the callers see it: they never ask which."""

    name: str
    closed: bool = False
    calls: list[tuple[str, object]] = field(default_factory=list)

    def capabilities(self) -> Capabilities:
        return FORWARDED

    async def declared(self) -> QueueStats:
        self.calls.append(("declared", None))
        return await self.stats()

    async def consume(self, consumer: Consumer, sink: DeliverySink) -> None:
        self.calls.append(("consume", consumer.tag))

    def cancel(self, consumer_tag: str) -> None:
        self.calls.append(("cancel", consumer_tag))

    def channel_closed(self, channel_key: str) -> None:
        self.calls.append(("channel_closed", channel_key))

    async def dequeue(self, channel_key: str, no_ack: bool) -> Dequeued | None:
        return None

    def ack(self, offsets: Sequence[int]) -> None: ...

    def reject(self, offsets: Sequence[int], requeue: bool) -> None: ...

    async def settles_durable(self) -> None: ...

    def schedule_pump(self) -> None: ...

    async def purge(self) -> int:
        return 4

    async def stats(self) -> QueueStats:
        return QueueStats(7, 1, 0, 7)


@dataclass
class FakePlaces:
    queues: dict[str, FakeQueue] = field(default_factory=dict)
    down: set[str] = field(default_factory=set)  # queues whose leader node is down
    placed: list[str] = field(default_factory=list)

    def endpoint(self, vhost: str, name: str) -> FakeQueue | None:
        if name in self.down:
            raise BrokerError(NOT_FOUND, f"home node of '{name}' is down")
        return self.queues.get(name)

    async def endpoint_when_open(self, vhost: str, name: str) -> FakeQueue | None:
        return self.endpoint(vhost, name)

    def place_queue(self, vhost: str, name: str, arguments: Mapping[str, Any],
                    exclusive: bool) -> tuple[str | None, tuple[str, ...]]:
        self.placed.append(name)
        return "n2", ("n2",)

    async def released(self, vhost: str, name: str) -> None: ...


class World:
    def __init__(self) -> None:
        self.state = MetadataState()
        for command in bootstrap_commands(hash_password("guest", b"salt"), "guest"):
            self.state.apply(command)
        self.places = FakePlaces()
        self.commands: list[Command] = []
        access = AccessControl(BrokerConfig(data_dir="/nowhere"), lambda: self.state,
                               DefinitionsLoaded("n1", lambda: True))
        self.definitions = Definitions(lambda: self.state, access, self.apply, self.places)
        self.consuming = Consuming(lambda: self.state, access, self.places)

    async def apply(self, command: Command) -> Applied:
        self.commands.append(command)
        applied = self.state.apply(command)
        if isinstance(command, DeclareQueue):
            self.places.queues.setdefault(command.name, FakeQueue(command.name))
        return applied


async def test_a_declare_places_a_new_queue_once_and_asks_the_queue_its_counts() -> None:
    world = World()
    assert await world.definitions.declare_queue(SESSION, "q") == ("q", 7, 1)
    assert await world.definitions.declare_queue(SESSION, "q") == ("q", 7, 1)
    assert world.places.placed == ["q"]  # a redeclare keeps the queue where it is
    first = world.commands[0]
    assert isinstance(first, DeclareQueue) and first.leader_node == "n2"
    assert world.places.queues["q"].calls == [("declared", None), ("declared", None)]


async def test_a_queue_whose_leader_is_down_can_still_be_deleted() -> None:
    world = World()
    await world.definitions.declare_queue(SESSION, "q")
    world.places.down.add("q")
    with pytest.raises(BrokerError, match="is down"):
        await world.definitions.purge_queue(SESSION, "q")
    assert await world.definitions.delete_queue(SESSION, "q", if_empty=True) == 0
    assert world.commands[-1] == DeleteQueue("/", "q", if_unused=False, if_empty=True)


async def test_consuming_speaks_only_the_queue_interface() -> None:
    world = World()
    await world.definitions.declare_queue(SESSION, "q")
    sink: Any = type("Sink", (), {"channel_key": "conn-1:1"})()
    tag, queue = await world.consuming.consume(SESSION, "q", sink)
    assert tag.startswith("amq.ctag-") and queue is world.places.queues["q"]
    with pytest.raises(BrokerError, match="invalid arg 'x-priority'"):
        await world.consuming.consume(SESSION, "q", sink, arguments={"x-priority": "high"})
    world.consuming.cancel(SESSION, "q", tag)
    world.places.down.add("q")
    world.consuming.channel_closed("/", "conn-1:1", {"q"})  # its node is down: quietly
    assert world.places.queues["q"].calls[1:] == [("consume", tag), ("cancel", tag)]
    with pytest.raises(BrokerError, match="no queue 'missing'"):
        await world.consuming.get(SESSION, "missing", "conn-1:1", no_ack=True)
