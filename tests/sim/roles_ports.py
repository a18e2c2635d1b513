"""The simulated ports the shipped `RoleMovesDriver` runs over on a simulated node.

The core (`RoleMoves`, logbroker/role_moves.py) and its driver
(logbroker/role_moves_driver.py) are the shipped code; only what they reach
the node through is simulated here, and every step is done at once (the
driver takes the outcome after the effects under way, as it takes a late
one from an asyncio task):

- the metadata: the node's `MetadataState`, current as the shipped
  `ReadIndex` says (`QueueNode._metadata_current`);
- the shells led here: the node's `LeaderReplica`s, opened on its
  `MemoryFileSystem` with a `ReplicaSetup` from the queue's record
  (`Broker._replica_setup`), closed fenced (`Broker.close_queue`);
- the follower replicas: the node's shipped `FollowerFetchDriver`
  (`QueueNode.follow` / `stop_following`);
- proposals: the node's Raft proposals (`QueueNode.propose`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from logbroker.metadata import Command, MetadataState
from logbroker.queue.replica_setup import ReplicaSetup, StaleEpochError
from logbroker.queue.replication_gate import ReplicationGate
from logbroker.role_moves import Key, StepFailed
from logbroker.role_moves_driver import Done
from replication.queue.replication_leader import ReplicationLimits
from segments.memory_filesystem import MemoryFileSystem
from tests.sim.queue_leader import VHOST, LeaderHooks, LeaderReplica


class RolesNode(Protocol):
    """The simulated node whose roles these are (`QueueNode`)."""

    id: str
    fs: MemoryFileSystem
    state: MetadataState
    leaders: dict[str, LeaderReplica]

    @property
    def hooks(self) -> LeaderHooks: ...

    @property
    def limits(self) -> ReplicationLimits: ...

    def log(self, text: str) -> None: ...

    def metadata_current(self) -> bool: ...

    def propose(self, command: Command, done: Callable[[bool], None] | None = None
                ) -> None: ...

    def following(self) -> set[Key]: ...

    def follow(self, queue: str) -> None: ...

    def stop_following(self, queue: str) -> int | None: ...


class SimShell:
    """`OpenShell` over a simulated leader (always replicated)."""

    replicated = True

    def __init__(self, shell: LeaderReplica) -> None:
        self.gate: ReplicationGate | None = shell.gate


class SimRolePorts:
    def __init__(self, node: RolesNode) -> None:
        self._node = node

    def current(self) -> bool:
        return self._node.metadata_current()

    def state(self) -> MetadataState:
        return self._node.state

    def shell(self, key: Key) -> SimShell | None:
        shell = self._node.leaders.get(key[1])
        return SimShell(shell) if shell is not None else None

    def led(self) -> Iterable[Key]:
        return [(VHOST, queue) for queue in self._node.leaders]

    def following(self) -> set[Key]:
        return self._node.following()

    @property
    def fs(self) -> MemoryFileSystem:
        return self._node.fs

    def directory(self, key: Key) -> str:
        return f"/queues/{key[1]}"

    def open_leader(self, key: Key, high_watermark: int | None) -> str | None:
        node, queue = self._node, key[1]
        record = node.state.queue(*key)
        assert record is not None
        setup = ReplicaSetup(node.id, record.epoch, record.members, record.in_sync,
                             high_watermark, limits=node.limits)
        try:
            shell = LeaderReplica(node.id, queue, node.fs, self.directory(key), setup,
                                  node.hooks)
        except StaleEpochError as error:
            return str(error)
        node.log(f"{node.id} leads {queue} (epoch {setup.epoch}, in sync "
                 f"{list(setup.in_sync)}, hw {setup.high_watermark})")
        node.leaders[queue] = shell
        return None

    def close_shell(self, key: Key, reason: str, done: Done) -> None:
        node = self._node
        node.log(f"{node.id} closes its {key[1]} shell: {reason}")
        node.leaders.pop(key[1]).close(reason)
        done(None)

    def stop_following(self, key: Key, done: Callable[[int | StepFailed | None], None]
                       ) -> None:
        done(self._node.stop_following(key[1]))

    def forget(self, key: Key, done: Done) -> None:
        # The simulation's replica sets never change: a copy is never dropped.
        self._node.stop_following(key[1])
        done(None)

    def follow(self, key: Key) -> None:
        self._node.follow(key[1])

    def propose(self, command: Command, done: Done) -> None:
        self._node.propose(command, lambda ok: done(None if ok else "not committed"))
