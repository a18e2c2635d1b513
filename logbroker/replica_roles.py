"""`ReplicaRoles`: which replicated queues this node leads or follows, and the moves between.

Theory of operation. The metadata names each replicated queue's leader,
members and epoch. After every change the broker calls `sync(vhost, name)`,
and this brings the node in line with the record, one queue at a time and
in order (the moves of one queue are chained):

- leader here: close the follower replica if there is one (it knew the high
  watermark), then open the queue shell on the same directory, as leader of
  the record's epoch; a shell of an older epoch, or one that became (or
  stopped being) replicated, is closed and reopened; a changed replica set
  in the same epoch is handed to the shell's replication state;
- follower here: fence and close the shell if this node led the queue (its
  consumers are cancelled; what it had not replicated is cut when it
  follows), then follow;
- neither (not a member any more, or the queue is gone): stop following and
  delete the copy.

Each move reads the record when it runs, so a burst of changes ends in the
state of the last one. Until the metadata is current (a restarted node
replaying its log, `current`), moves are deferred: acting on an old record
would open a queue for an epoch that has ended.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from logbroker.errors import BrokerError
from logbroker.metadata import Applied, Command, ElectQueueLeader, MetadataState, QueueRecord
from logbroker.queue.queue_settings import QueueSettings
from logbroker.queue.queue_type import Capabilities
from logbroker.queue.replay_view import ReplayView
from logbroker.queue.replica_setup import StaleEpochError
from logbroker.queue.replication_gate import ReplicationGate
from replication.queue.epoch_history import EpochHistory, EpochHistoryError
from segments.clock import SYSTEM_CLOCK, Clock
from segments.filesystem import FileSystem

logger = logging.getLogger(__name__)
Key = tuple[str, str]


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


class ReplicaRoles:
    def __init__(self, broker: RolesHost, replicas: QueueReplicas, node_name: str,
                 current: Callable[[], bool] | None = None, clock: Clock = SYSTEM_CLOCK
                 ) -> None:
        self._broker = broker
        self._clock = clock
        self.replicas = replicas
        self._node = node_name
        self._chains: dict[Key, asyncio.Future[None]] = {}
        # Whether the metadata is current (a restarted node replaying its log is not:
        # it would open queues for epochs long ended); moves wait until it is.
        self._current = current or (lambda: True)
        self._deferred: set[Key] = set()

    @property
    def current(self) -> bool:
        return self._current()

    def catch_up(self) -> None:
        """The metadata may be current now: make the moves that waited for it."""
        if self._deferred and self._current():
            deferred, self._deferred = self._deferred, set()
            for vhost, name in sorted(deferred):
                self.sync(vhost, name)

    def sync(self, vhost: str, name: str) -> None:
        key = (vhost, name)
        if not self._current():
            self._deferred.add(key)
            return
        previous = self._chains.get(key)
        if previous is None and self._move_now(key):
            return  # nothing to wait for: a declare finds its queue open when it returns
        task = asyncio.ensure_future(self._after(previous, key))
        self._chains[key] = task
        task.add_done_callback(lambda done: self._finished(key, done))

    def _finished(self, key: Key, task: asyncio.Future[None]) -> None:
        if self._chains.get(key) is task:
            del self._chains[key]
        if not task.cancelled() and task.exception() is not None:
            logger.error("queue %r in vhost %r: replica role change failed: %s",
                         key[1], key[0], task.exception())

    async def moved(self, vhost: str, name: str, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) until the queue's role change under way is done."""
        chain = self._chains.get((vhost, name))
        if chain is not None:
            await asyncio.wait([chain], timeout=timeout_s)

    async def settle(self) -> None:
        while self._chains:
            await asyncio.gather(*list(self._chains.values()), return_exceptions=True)

    def sync_all(self) -> None:
        """After a snapshot or at start: every queue this node leads, follows or has open,
        and every copy kept here."""
        keys = set(self.replicas.following())
        keys.update((shell.settings.vhost, shell.name) for shell in self._broker.all_queues())
        state = self._broker.state
        for vhost_record in state.vhosts():
            for record in state.queues(vhost_record.name):
                if self._node in record.members or record.leader_node in (None, self._node):
                    keys.add((vhost_record.name, record.name))
        for vhost, name in sorted(keys):
            self.sync(vhost, name)

    async def _after(self, previous: asyncio.Future[None] | None, key: Key) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        await self._move(key)

    def _open(self, key: Key, high_watermark: int | None) -> None:
        try:
            self._broker.open_queue(key[0], key[1], high_watermark)
        except StaleEpochError as error:
            # Our copy is newer than the record we acted on: wait for newer metadata.
            logger.info("queue %r in vhost %r not opened yet: %s", key[1], key[0], error)
            self._deferred.add(key)

    def _move_now(self, key: Key) -> bool:
        """Make a move that needs no waiting (open a new queue, start following) at once;
        False when the move must close something first."""
        vhost, name = key
        broker = self._broker
        record = broker.state.queue(vhost, name)
        shell = broker.queue(vhost, name)
        following = key in self.replicas.following()
        if record is None or shell is not None or following:
            return False
        if record.leader_node == self._node and self._led_before(record):
            return False  # a new epoch first (`_move`)
        if record.leader_node == self._node:
            logger.info("node %s leads queue %r in vhost %r (epoch %d)", self._node, name,
                        vhost, record.epoch)
            self._open(key, None)
            return True
        if record.replicated and self._node in record.members:
            self.replicas.follow(vhost, name)
        return True

    def _led_before(self, record: QueueRecord) -> bool:
        """Whether this node's copy already led the record's epoch: it restarted (or
        reopens) as the leader it was, and may have had an in-sync change in flight
        that the record does not show yet."""
        if not record.replicated:
            return False
        directory = self._broker.queue_directory(record.vhost, record.name)
        try:
            return EpochHistory.load(self._broker.fs, directory).latest_epoch == record.epoch
        except EpochHistoryError:
            return True  # unreadable: a new epoch is the safe side

    async def _new_epoch(self, record: QueueRecord) -> None:
        """Lead again from a new epoch, so whatever the old incarnation proposed for
        the old one (an in-sync change) is refused by the epoch check."""
        in_sync = (self._node, *(n for n in record.in_sync if n != self._node))
        logger.info("node %s led queue %r in vhost %r at epoch %d before: starting epoch %d",
                    self._node, record.name, record.vhost, record.epoch, record.epoch + 1)
        try:
            await self._broker.apply(ElectQueueLeader(
                record.vhost, record.name, record.epoch, self._node, in_sync,
                out_of_sync=self._node not in record.in_sync))
        except BrokerError as error:
            logger.warning("queue %r: a new epoch was not committed (%s); retrying later",
                           record.name, error.reply_text)
            self._deferred.add((record.vhost, record.name))

    def _follow_replica_set(self, shell: LedQueue, record: QueueRecord) -> None:
        """Hand a changed replica set (same epoch) to the open leader's gate."""
        gate = shell.replication
        if gate is None:
            return
        if gate.leader.members != record.members:
            gate.moved(lambda: gate.leader.set_members(
                record.members, record.in_sync, self._clock.wall_ms()))
        elif gate.leader.in_sync != record.in_sync:
            # An in-sync change applied while the metadata was not current.
            gate.moved(lambda: gate.leader.in_sync_committed(record.in_sync))

    async def _move(self, key: Key) -> None:
        vhost, name = key
        broker = self._broker
        record = broker.state.queue(vhost, name)
        shell = broker.queue(vhost, name)
        if record is not None and record.leader_node == self._node:
            if shell is not None:
                if _leads_as_recorded(shell, record):
                    self._follow_replica_set(shell, record)
                    return
                # A new epoch, or the queue became (or stopped being) replicated.
                await broker.close_queue(vhost, name, f"epoch {record.epoch} began")
            high_watermark: int | None = None
            if key in self.replicas.following():
                high_watermark = await self.replicas.stop(vhost, name)
            if self._led_before(record):
                await self._new_epoch(record)
                return
            logger.info("node %s leads queue %r in vhost %r (epoch %d)", self._node, name,
                        vhost, record.epoch)
            self._open(key, high_watermark)
            return
        if shell is not None:
            epoch = record.epoch if record is not None else "none"
            await broker.close_queue(vhost, name, f"node {self._node} no longer leads the "
                                     f"queue (epoch {epoch})")
        if record is not None and record.replicated and self._node in record.members:
            self.replicas.follow(vhost, name)
        elif key in self.replicas.following():
            await self.replicas.forget(vhost, name)


def _leads_as_recorded(shell: LedQueue, record: QueueRecord) -> bool:
    """Whether the open shell is the leader the record names: replicated as the record
    says, and (replicated) of the record's epoch."""
    if shell.capabilities().replicated != record.replicated:
        return False
    return shell.replication is None or shell.replication.leader.epoch == record.epoch
