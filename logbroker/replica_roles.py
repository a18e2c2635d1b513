"""`ReplicaRoles`: which replicated queues this node leads or follows, on asyncio.

Theory of operation. The `RoleMoves` core (role_moves.py) decides each
queue's next move (lead, follow, close fenced, defer while the metadata is
not current, wait out a stale epoch) and the `RoleMovesDriver`
(role_moves_driver.py) carries its steps out. This module gives the driver
its asyncio ports and nothing else: the broker's queue shells (`RolesHost`:
open, close, the metadata, proposals through `apply`), this node's follower
replicas (`QueueReplicas`), and one task per step that must wait (a close,
a stop, a proposal, a forget), which reports back when done. The
deterministic simulation (tests/sim) runs the same core and driver over
simulated ports.

After every change of a queue's record the broker calls `sync(vhost, name)`;
`moved` waits until the queue's move under way is over (a declare or a
consume that arrives while this node becomes the leader); `settle` waits
until no step is under way (shutdown, tests).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from logbroker.errors import BrokerError
from logbroker.metadata import Applied, Command, MetadataState
from logbroker.queue.queue_settings import QueueSettings
from logbroker.queue.queue_type import Capabilities
from logbroker.queue.replay_view import ReplayView
from logbroker.queue.replica_setup import StaleEpochError
from logbroker.queue.replication_gate import ReplicationGate
from logbroker.role_moves import Key, RoleMoves, StepFailed
from logbroker.role_moves_driver import Done, RoleMovesDriver
from segments.clock import SYSTEM_CLOCK, Clock
from segments.filesystem import FileSystem

T = TypeVar("T")


class LedQueue(Protocol):
    """A queue this node leads, as the roles see it (`QueueShell`)."""

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> QueueSettings: ...

    @property
    def replication(self) -> ReplicationGate | None: ...

    def capabilities(self) -> Capabilities: ...


class RolesHost(Protocol):
    """What the roles need from the node's broker (`Broker`): the metadata, the queues
    led here, and opening and closing them."""

    @property
    def state(self) -> MetadataState: ...

    @property
    def fs(self) -> FileSystem: ...

    def queue(self, vhost: str, name: str) -> LedQueue | None: ...

    def all_queues(self) -> Sequence[LedQueue]: ...

    def queue_directory(self, vhost: str, name: str) -> str: ...

    def open_queue(self, vhost: str, name: str, high_watermark: int | None) -> None: ...

    async def close_queue(self, vhost: str, name: str, reason: str) -> None: ...

    async def apply(self, command: Command) -> Applied: ...


class QueueReplicas(Protocol):
    """The follower replicas of this node (`logbroker.cluster.queue_followers`)."""

    def following(self) -> set[Key]: ...

    def follow(self, vhost: str, name: str) -> None: ...

    async def stop(self, vhost: str, name: str) -> int | None: ...

    async def forget(self, vhost: str, name: str) -> None: ...

    def view(self, vhost: str, name: str) -> ReplayView | None:
        """This node's follower copy as a replay source (None: none readable)."""
        ...


class _Shell:
    """`OpenShell` over a `LedQueue`."""

    def __init__(self, queue: LedQueue) -> None:
        self.replicated = queue.capabilities().replicated
        self.gate = queue.replication


class BrokerRolePorts:
    """`RolePorts` over the broker and the follower replicas; a step that waits runs
    as a task (`tasks`) that reports back when done."""

    def __init__(self, broker: RolesHost, replicas: QueueReplicas,
                 current: Callable[[], bool]) -> None:
        self._broker = broker
        self._replicas = replicas
        self.current = current
        self.tasks: set[asyncio.Future[None]] = set()

    def state(self) -> MetadataState:
        return self._broker.state

    def shell(self, key: Key) -> _Shell | None:
        queue = self._broker.queue(*key)
        return _Shell(queue) if queue is not None else None

    def led(self) -> Iterable[Key]:
        return [(queue.settings.vhost, queue.name) for queue in self._broker.all_queues()]

    def following(self) -> set[Key]:
        return self._replicas.following()

    @property
    def fs(self) -> FileSystem:
        return self._broker.fs

    def directory(self, key: Key) -> str:
        return self._broker.queue_directory(*key)

    def open_leader(self, key: Key, high_watermark: int | None) -> str | None:
        try:
            self._broker.open_queue(*key, high_watermark)
        except StaleEpochError as error:
            return str(error)
        return None

    def close_shell(self, key: Key, reason: str, done: Done) -> None:
        self._spawn(self._broker.close_queue(*key, reason), lambda _: done(None),
                    lambda error: done(str(error)))

    def stop_following(self, key: Key, done: Callable[[int | StepFailed | None], None]
                       ) -> None:
        self._spawn(self._replicas.stop(*key), done,
                    lambda error: done(StepFailed(str(error))))

    def forget(self, key: Key, done: Done) -> None:
        self._spawn(self._replicas.forget(*key), lambda _: done(None),
                    lambda error: done(str(error)))

    def follow(self, key: Key) -> None:
        self._replicas.follow(*key)

    def propose(self, command: Command, done: Done) -> None:
        def refused(error: Exception) -> None:
            done(error.reply_text if isinstance(error, BrokerError) else str(error))
        self._spawn(self._broker.apply(command), lambda _: done(None), refused)

    def _spawn(self, step: Awaitable[T], done: Callable[[T], None],
               failed: Callable[[Exception], None]) -> None:
        async def run() -> None:
            try:
                result = await step
            except Exception as error:
                failed(error)
            else:
                done(result)  # inside the task: a next step's task is added before it ends
        task = asyncio.ensure_future(run())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)


class ReplicaRoles:
    def __init__(self, broker: RolesHost, replicas: QueueReplicas, node_name: str,
                 current: Callable[[], bool] | None = None, clock: Clock = SYSTEM_CLOCK
                 ) -> None:
        self.replicas = replicas
        # Whether the metadata is current (a restarted node replaying its log is not:
        # it would open queues for epochs long ended); moves wait until it is.
        self._ports = BrokerRolePorts(broker, replicas, current or (lambda: True))
        self._waiting: dict[Key, asyncio.Future[None]] = {}
        self.driver = RoleMovesDriver(RoleMoves(node_name), self._ports, clock,
                                      on_settled=self._settled)

    @property
    def current(self) -> bool:
        return self.driver.current

    def catch_up(self) -> None:
        """The metadata may be current now: make the moves that waited for it."""
        self.driver.catch_up()

    def sync(self, vhost: str, name: str) -> None:
        self.driver.sync((vhost, name))

    def sync_all(self) -> None:
        """After a snapshot or at start: every queue this node leads, follows or has open,
        and every copy kept here."""
        self.driver.sync_all()

    async def moved(self, vhost: str, name: str, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) until the queue's role change under way is done."""
        key = (vhost, name)
        if not self.driver.moving(key):
            return
        waiting = self._waiting.get(key)
        if waiting is None:
            waiting = self._waiting[key] = asyncio.get_running_loop().create_future()
        await asyncio.wait([waiting], timeout=timeout_s)

    async def settle(self) -> None:
        while self._ports.tasks:
            await asyncio.gather(*list(self._ports.tasks), return_exceptions=True)

    def _settled(self, key: Key) -> None:
        waiting = self._waiting.pop(key, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(None)
