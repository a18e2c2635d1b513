"""`NodeRoles`: which queues a simulated node leads or follows, and the moves between.

It mirrors `ReplicaRoles` (logbroker/replica_roles.py), with every move made
at once (the real moves that must close something first are chained tasks):
after every applied change the node calls `sync(queue)`, and the move reads
the record when it runs.

- While the metadata is not current (`current`: `ClusterNode
  ._metadata_current`, the node knows a Raft leader and has applied everything
  it knows committed), the move waits (`deferred`); `catch_up`, which the
  node calls after every applied command and on every heartbeat beat, makes
  the waiting moves once it is.
- Leader here: a shell of the record's epoch stays (a changed replica set
  goes to its gate); one of an older epoch closes, fenced; the follower stops
  and hands over the high watermark it knew; the queue opens as leader of the
  record's epoch (`LeaderReplica`, through `open_queue_files`). When the copy
  holds a newer epoch than the record (`open_gate` raises `StaleEpochError`,
  `open_queue_files` lets go of the files), the queue waits in `deferred`
  too.
- Otherwise: close the shell if there is one (fenced: its consumers are
  cancelled), and follow if a member.

`RECONCILE_IN_SYNC` models a fix the wiring does not have yet: an in-sync
change that `Broker._in_sync_changed` ignores while the metadata is not
current (the real code drops it, and the gate's pending change then never
ends) makes the queue's move wait instead, and a same-epoch move hands the
record's in-sync set to the gate when it differs. False mirrors the wiring.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Protocol

from logbroker.metadata import Command, ElectQueueLeader, MetadataState, QueueRecord
from logbroker.queue.replica_setup import ReplicaSetup, StaleEpochError
from replication.queue.epoch_history import EpochHistory, EpochHistoryError
from replication.queue.replication_leader import ReplicationLimits
from segments.memory_filesystem import MemoryFileSystem
from tests.sim.queue_leader import VHOST, LeaderHooks, LeaderReplica

RECONCILE_IN_SYNC = True


class RolesHost(Protocol):
    """The node whose roles these are."""

    id: str
    fs: MemoryFileSystem
    state: MetadataState
    leaders: dict[str, LeaderReplica]

    @property
    def now(self) -> int: ...

    def propose(self, command: Command, done: Callable[[bool], None] | None = None
                ) -> None: ...

    @property
    def hooks(self) -> LeaderHooks: ...

    @property
    def rng(self) -> random.Random: ...

    @property
    def limits(self) -> ReplicationLimits: ...

    @property
    def max_sync_delay(self) -> int: ...

    @property
    def stats(self) -> Counter[str]: ...

    def log(self, text: str) -> None: ...

    def follow(self, queue: str) -> None:
        """Follow the queue (already following: a waiting fetch loop retries at once)."""

    def stop_following(self, queue: str) -> int | None:
        """Stop following; the high watermark the replica knew (None: none heard)."""


class NodeRoles:
    def __init__(self, host: RolesHost, current: Callable[[], bool]) -> None:
        self._host = host
        self._current = current
        self.deferred: set[str] = set()

    @property
    def current(self) -> bool:
        return self._current()

    def catch_up(self) -> None:
        """The metadata may be current now: make the moves that waited for it."""
        if self.deferred and self._current():
            deferred, self.deferred = self.deferred, set()
            for queue in sorted(deferred):
                self.sync(queue)

    def in_sync_ignored(self, queue: str) -> None:
        """`Broker._in_sync_changed` ignored a change (not current): the wiring drops it;
        with `RECONCILE_IN_SYNC` the queue's move waits, and hands the set over."""
        if RECONCILE_IN_SYNC:
            self.sync(queue)

    def sync(self, queue: str) -> None:
        if not self._current():
            if queue not in self.deferred:
                self._host.stats["moves_deferred"] += 1
            self.deferred.add(queue)
            return
        self._move(queue)

    def _move(self, queue: str) -> None:
        host = self._host
        record = host.state.queue(VHOST, queue)
        shell = host.leaders.get(queue)
        if record is not None and record.leader_node == host.id:
            if shell is not None:
                if shell.epoch == record.epoch:
                    gate = shell.gate
                    if gate.leader.members != record.members:  # never, with fixed members
                        shell.moved(partial(gate.leader.set_members, record.members,
                                            record.in_sync, host.now))
                    elif RECONCILE_IN_SYNC and gate.leader.in_sync != record.in_sync:
                        host.log(f"{host.id} hands in sync {list(record.in_sync)} to its "
                                 f"{queue} shell (was {list(gate.leader.in_sync)})")
                        shell.moved(partial(gate.leader.in_sync_committed, record.in_sync))
                    return
                self._close(queue, f"epoch {record.epoch} began")
            high_watermark = host.stop_following(queue)
            if self._led_before(queue, record):
                self._new_epoch(queue, record)
                return
            self._open(queue, ReplicaSetup(host.id, record.epoch, record.members,
                                           record.in_sync, high_watermark, limits=host.limits))
            return
        if shell is not None:
            epoch = record.epoch if record is not None else "none"
            self._close(queue, f"node {host.id} no longer leads the queue (epoch {epoch})")
        if record is not None and record.replicated and host.id in record.members:
            host.follow(queue)

    def _led_before(self, queue: str, record: QueueRecord) -> bool:
        """ReplicaRoles._led_before: this copy already led the record's epoch."""
        if not record.replicated:
            return False
        try:
            history = EpochHistory.load(self._host.fs, f"/queues/{queue}")
        except EpochHistoryError:
            return True
        return history.latest_epoch == record.epoch

    def _new_epoch(self, queue: str, record: QueueRecord) -> None:
        """ReplicaRoles._new_epoch: lead again from a new epoch (a failed proposal waits)."""
        host = self._host
        in_sync = (host.id, *(n for n in record.in_sync if n != host.id))
        host.log(f"{host.id} led {queue} at epoch {record.epoch} before: new epoch")
        host.stats["new_epochs_on_reopen"] += 1

        def done(ok: bool) -> None:
            if not ok:
                self.deferred.add(queue)
        host.propose(ElectQueueLeader(VHOST, queue, record.epoch, host.id, in_sync,
                                      out_of_sync=host.id not in record.in_sync), done)

    def _open(self, queue: str, setup: ReplicaSetup) -> None:
        host = self._host
        try:
            shell = LeaderReplica(host.id, queue, host.fs, f"/queues/{queue}", setup,
                                  host.hooks)
        except StaleEpochError as error:
            host.log(f"{host.id} does not open {queue} yet: {error}")
            host.stats["stale_epoch_opens"] += 1
            self.deferred.add(queue)
            return
        host.log(f"{host.id} leads {queue} (epoch {setup.epoch}, in sync "
                 f"{list(setup.in_sync)}, hw {setup.high_watermark})")
        host.leaders[queue] = shell

    def _close(self, queue: str, reason: str) -> None:
        host = self._host
        host.log(f"{host.id} closes its {queue} shell: {reason}")
        host.leaders.pop(queue).close(reason)
