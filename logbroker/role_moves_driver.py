"""`RoleMovesDriver`: runs the `RoleMoves` core over narrow ports (no asyncio here).

Theory of operation. The driver is the one piece of shipped code between the
core and the world, used alike by the asyncio node (`ReplicaRoles`, ports
over the broker and its follower replicas) and by the simulation (ports over
its simulated leaders and the shipped follower driver). On every call
(`sync`, `catch_up`, `sync_all`) and every step reported done it reads the
queue's record and what the node holds for it through `RolePorts`, enters
the core, and carries the effects out in order:

- `CloseShell`, `StopFollowing`, `Forget`, `ProposeEpoch` go to the ports,
  which call back once when done (at once, or later from a task);
- `OpenLeader` and `ReadCopyEpoch` are answered here at once (the copy's
  epoch history is read through the ports' `FileSystem`);
- `Follow` goes to the ports, `HandMembers` / `HandInSync` to the open
  shell's gate (`gate.moved`), `Notice` to the log and the statistics,
  `Settled` to whoever waits for the queue's move.

Invariants: the core is entered by one call at a time (`SerialCalls`): a
port that answers from inside the effect being carried out queues its
outcome, which runs after the current effects; an exception from a port
becomes the step's `StepFailed`, it never escapes into the caller.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Protocol

from logbroker.cluster.serial_calls import SerialCalls
from logbroker.metadata import Command, MetadataState, QueueRecord
from logbroker.role_moves import (
    Closed,
    CloseShell,
    CopyRead,
    EpochProposed,
    Follow,
    Forget,
    Forgotten,
    HandInSync,
    HandMembers,
    Holding,
    Key,
    LeaderShell,
    Notice,
    Opened,
    OpenLeader,
    Outcome,
    ProposeEpoch,
    ReadCopyEpoch,
    RoleEffect,
    RoleMoves,
    Settled,
    StepFailed,
    StopFollowing,
    Stopped,
)
from replication.queue.epoch_history import EpochHistory, EpochHistoryError
from replication.queue.replication_leader import ReplicationLeader
from segments.clock import Clock
from segments.filesystem import FileSystem

logger = logging.getLogger("logbroker.replica_roles")
Done = Callable[[str | None], None]  # None: done; else why not


class Gate(Protocol):
    """An open leader's `ReplicationGate`, as the roles use it."""

    @property
    def leader(self) -> ReplicationLeader: ...

    def moved(self, change: Callable[[], object]) -> object: ...


class OpenShell(Protocol):
    """The queue shell open here."""

    @property
    def replicated(self) -> bool: ...

    @property
    def gate(self) -> Gate | None: ...


class RolePorts(Protocol):
    """What the roles read and do: the metadata, the shells led here, the follower
    replicas, the copies on disk, metadata proposals."""

    def current(self) -> bool:
        """Whether the applied metadata is as new as the cluster's."""

    def state(self) -> MetadataState: ...

    def shell(self, key: Key) -> OpenShell | None: ...

    def led(self) -> Iterable[Key]: ...

    def following(self) -> set[Key]: ...

    @property
    def fs(self) -> FileSystem: ...

    def directory(self, key: Key) -> str: ...

    def open_leader(self, key: Key, high_watermark: int | None) -> str | None:
        """Open the queue as leader of its record's epoch; a text: not opened, the copy
        holds a newer epoch (`StaleEpochError`)."""

    def close_shell(self, key: Key, reason: str, done: Done) -> None: ...

    def stop_following(self, key: Key, done: Callable[[int | StepFailed | None], None]
                       ) -> None:
        """Stop following and close the replica; done with the high watermark it knew
        (None: none heard since it was opened)."""

    def forget(self, key: Key, done: Done) -> None: ...

    def follow(self, key: Key) -> None: ...

    def propose(self, command: Command, done: Done) -> None:
        """Done with None once committed, or why not."""


def log_notice(level: int, text: str) -> None:
    logger.log(level, text)


class RoleMovesDriver:
    def __init__(self, core: RoleMoves, ports: RolePorts, clock: Clock,
                 notice: Callable[[int, str], None] = log_notice,
                 stats: Counter[str] | None = None,
                 on_settled: Callable[[Key], None] | None = None) -> None:
        self.core = core
        self._ports = ports
        self._clock = clock
        self._notice = notice
        self.stats: Counter[str] = stats if stats is not None else Counter()
        self._on_settled = on_settled
        self._calls = SerialCalls()

    @property
    def current(self) -> bool:
        return self._ports.current()

    def moving(self, key: Key) -> bool:
        return self.core.moving(key)

    # ------------------------------------------------------------ the calls

    def sync(self, key: Key) -> None:
        self._run(key, lambda record, holding: self.core.sync(
            key, record, holding, self._ports.current()))

    def catch_up(self) -> None:
        """The metadata may be current now: make the moves that waited for it."""
        def run() -> None:
            for key in self.core.catch_up(self._ports.current()):
                self.sync(key)  # each runs after this call, in order
        self._calls.run(run)

    def sync_all(self) -> None:
        """After a snapshot or at start: every queue this node leads, follows or has open,
        and every copy kept here."""
        ports, node = self._ports, self.core.node
        keys = set(ports.following()) | set(ports.led())
        state = ports.state()
        for vhost_record in state.vhosts():
            for record in state.queues(vhost_record.name):
                if node in record.members or record.leader_node in (None, node):
                    keys.add((vhost_record.name, record.name))
        for key in sorted(keys):
            self.sync(key)

    def stop(self) -> None:
        """Nothing more reaches the core (the node is going away)."""
        self._calls.stop()

    # ------------------------------------------------------------- the loop

    def _done(self, key: Key, outcome: Outcome) -> None:
        self._run(key, lambda record, holding: self.core.done(key, outcome, record, holding))

    def _run(self, key: Key,
             call: Callable[[QueueRecord | None, Holding], list[RoleEffect]]) -> None:
        def run() -> None:
            for effect in call(self._ports.state().queue(*key), self._holding(key)):
                if not self._calls.stopped:
                    self._carry_out(effect)
        self._calls.run(run)

    def _holding(self, key: Key) -> Holding:
        shell = self._ports.shell(key)
        following = key in self._ports.following()
        if shell is None:
            return Holding(None, following)
        gate = shell.gate
        if gate is None:
            return Holding(LeaderShell(shell.replicated), following)
        leader = gate.leader
        return Holding(LeaderShell(shell.replicated, leader.epoch, tuple(leader.members),
                                   tuple(leader.in_sync)), following)

    def _carry_out(self, effect: RoleEffect) -> None:
        key = effect.key if not isinstance(effect, Notice) else None
        try:
            self._apply(effect)
        except Exception as error:  # a port failed: the step fails, the caller goes on
            if key is None or not self.core.moving(key):
                raise
            self._done(key, StepFailed(str(error) or type(error).__name__))

    def _apply(self, effect: RoleEffect) -> None:
        ports = self._ports
        if isinstance(effect, CloseShell):
            ports.close_shell(effect.key, effect.reason, self._outcome(effect.key, Closed()))
        elif isinstance(effect, StopFollowing):
            ports.stop_following(effect.key, lambda result: self._done(
                effect.key, result if isinstance(result, StepFailed) else Stopped(result)))
        elif isinstance(effect, ReadCopyEpoch):
            self._done(effect.key, CopyRead(self._copy_epoch(effect.key)))
        elif isinstance(effect, ProposeEpoch):
            ports.propose(effect.command, lambda refusal: self._done(
                effect.key, EpochProposed(refusal)))
        elif isinstance(effect, OpenLeader):
            stale = ports.open_leader(effect.key, effect.high_watermark)
            self._done(effect.key, Opened(stale))
        elif isinstance(effect, Forget):
            ports.forget(effect.key, self._outcome(effect.key, Forgotten()))
        elif isinstance(effect, Follow):
            ports.follow(effect.key)
        elif isinstance(effect, HandMembers | HandInSync):
            self._hand(effect)
        elif isinstance(effect, Settled):
            if self._on_settled is not None:
                self._on_settled(effect.key)
        else:
            self._notice(effect.level, effect.text)
            if effect.count is not None:
                self.stats[effect.count] += 1

    def _outcome(self, key: Key, outcome: Outcome) -> Done:
        return lambda failure: self._done(
            key, outcome if failure is None else StepFailed(failure))

    def _copy_epoch(self, key: Key) -> int | None:
        """The latest epoch of this node's copy (None: unreadable)."""
        try:
            return EpochHistory.load(self._ports.fs, self._ports.directory(key)).latest_epoch
        except EpochHistoryError:
            return None

    def _hand(self, effect: HandMembers | HandInSync) -> None:
        shell = self._ports.shell(effect.key)
        gate = shell.gate if shell is not None else None
        if gate is None:
            return
        leader = gate.leader
        if isinstance(effect, HandMembers):
            members, in_sync = effect.members, effect.in_sync
            gate.moved(lambda: leader.set_members(members, in_sync, self._clock.wall_ms()))
        else:
            gate.moved(lambda: leader.in_sync_committed(effect.in_sync))
