"""`ReplicaRoles`: the roles' asyncio ports (steps as tasks; `moved` and `settle` wait)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from logbroker.errors import PRECONDITION_FAILED, BrokerError
from logbroker.metadata import AddVhost, Applied, Command, DeclareQueue, MetadataState
from logbroker.queue.queue_limits import QueueLimits
from logbroker.queue.queue_settings import QueueSettings
from logbroker.queue.queue_type import REPLICATED_LEADER, Capabilities
from logbroker.queue.replay_view import ReplayView
from logbroker.queue.replication_gate import ReplicationGate
from logbroker.replica_roles import ReplicaRoles
from replication.queue.epoch_history import EpochHistory
from segments.memory_filesystem import MemoryFileSystem

KEY = ("/", "q")


class Led:
    name = "q"
    settings = QueueSettings("/", "q", durable=True, limits=QueueLimits())
    replication: ReplicationGate | None = None

    def capabilities(self) -> Capabilities:
        return REPLICATED_LEADER


class Host:
    def __init__(self, leader: str, members: tuple[str, ...]) -> None:
        self.state = MetadataState()
        self.state.apply(AddVhost("/"))
        self.state.apply(DeclareQueue("/", "q", durable=True, leader_node=leader,
                                      members=members))
        self.fs = MemoryFileSystem()
        self.queues: dict[tuple[str, str], Led] = {}
        self.closing = asyncio.Event()
        self.calls: list[str] = []

    def queue(self, vhost: str, name: str) -> Led | None:
        return self.queues.get((vhost, name))

    def all_queues(self) -> Sequence[Led]:
        return list(self.queues.values())

    def queue_directory(self, vhost: str, name: str) -> str:
        return f"/queues/{name}"

    def open_queue(self, vhost: str, name: str, high_watermark: int | None) -> None:
        self.calls.append(f"open hw={high_watermark}")
        self.queues[(vhost, name)] = Led()

    async def close_queue(self, vhost: str, name: str, reason: str) -> None:
        self.calls.append(f"close: {reason}")
        await self.closing.wait()
        del self.queues[(vhost, name)]

    async def apply(self, command: Command) -> Applied:
        self.calls.append(type(command).__name__)
        raise BrokerError(PRECONDITION_FAILED, "no Raft leader")


class Replicas:
    def __init__(self) -> None:
        self.followed: set[tuple[str, str]] = set()

    def following(self) -> set[tuple[str, str]]:
        return set(self.followed)

    def follow(self, vhost: str, name: str) -> None:
        self.followed.add((vhost, name))

    async def stop(self, vhost: str, name: str) -> int | None:
        self.followed.discard((vhost, name))
        await asyncio.sleep(0)
        return 9

    async def forget(self, vhost: str, name: str) -> None:
        await self.stop(vhost, name)

    def view(self, vhost: str, name: str) -> ReplayView | None:
        return None


async def test_a_leader_that_lost_the_queue_follows_once_its_shell_closed() -> None:
    host, replicas = Host("n2", ("n2", "n1")), Replicas()
    host.queues[KEY] = Led()
    roles = ReplicaRoles(host, replicas, "n1")
    roles.sync(*KEY)
    waiting = asyncio.ensure_future(roles.moved(*KEY, 5.0))
    await asyncio.sleep(0.01)
    assert host.calls == ["close: node n1 no longer leads the queue (epoch 1)"]
    assert not waiting.done() and KEY not in replicas.followed
    host.closing.set()
    await asyncio.wait_for(waiting, 1.0)
    assert KEY in replicas.followed


async def test_moved_gives_up_after_its_timeout() -> None:
    host, replicas = Host("n2", ("n2", "n1")), Replicas()
    host.queues[KEY] = Led()
    roles = ReplicaRoles(host, replicas, "n1")
    roles.sync(*KEY)
    await roles.moved(*KEY, 0.01)
    assert KEY not in replicas.followed
    host.closing.set()
    await roles.settle()
    assert KEY in replicas.followed


async def test_a_promoted_follower_opens_from_the_high_watermark_it_knew() -> None:
    host, replicas = Host("n1", ("n1", "n2")), Replicas()
    replicas.followed.add(KEY)
    roles = ReplicaRoles(host, replicas, "n1")
    roles.sync(*KEY)
    await roles.moved(*KEY, 1.0)
    assert host.calls == ["open hw=9"] and not replicas.followed


async def test_a_new_epoch_not_committed_is_tried_again_at_catch_up() -> None:
    host, replicas = Host("n1", ("n1", "n2")), Replicas()
    history = EpochHistory()
    history.begin(1, 0)
    host.fs.makedirs("/queues/q")
    history.save(host.fs, "/queues/q")
    roles = ReplicaRoles(host, replicas, "n1")
    roles.sync(*KEY)
    await roles.settle()
    assert host.calls == ["ElectQueueLeader"] and roles.driver.core.deferred == {KEY}
    roles.catch_up()
    await roles.settle()
    assert host.calls == ["ElectQueueLeader", "ElectQueueLeader"]


async def test_moves_wait_for_current_metadata() -> None:
    host, replicas = Host("n1", ("n1", "n2")), Replicas()
    current = False
    roles = ReplicaRoles(host, replicas, "n1", lambda: current)
    roles.sync(*KEY)
    roles.catch_up()
    assert host.calls == [] and not roles.current
    current = True
    roles.catch_up()
    assert host.calls == ["open hw=None"]  # opened before catch_up returns
