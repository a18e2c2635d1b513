"""The simulated ports the shipped replication drivers run over on a simulated node.

The drivers (`FollowerFetchDriver`, replication/queue/follower_fetch_driver.py;
`LeaderFeedDriver`, replication/queue/leader_feed_driver.py) and their cores
are the shipped code; only what they reach the world through
is simulated here, all of it driven by the simulation's ticks and its one
seeded `random.Random`:

- `SimClock`: the simulation's tick counter as both monotonic and wall time
  (one tick counts as one millisecond);
- `SimTimers`: the node's timers, run in deadline order when the node works
  in a tick (`run_due`); a crash throws the node's timers away with it;
- `SimFetchTransport`: a fetch goes over the simulated network as `Fetch`,
  and the first `FetchReply` carrying its request id answers it (a copy the
  network duplicated is dropped; a lost one is never answered, and the core's
  timeout takes over, as with the cluster RPC);
- `SimDisk`: replicas on the node's `MemoryFileSystem`, with small segments;
  a sync lands a random number of ticks later (the fsync thread of the real
  disk port), so a crash before it loses the appended batches;
- `SimFeedQueues`: the node's `LeaderReplica`s as the queues it leads
  (`SimLedQueue`); a parked fetch waits in `SimParking` until the shell's
  `changes` count moves (how often its gate's `changes` was notified, what
  wakes a parked fetch in the broker), the shell is replaced, or its
  deadline passes, checked once per tick;
- `SimInSyncProposer`: `SetQueueInSync` through the node's Raft proposals.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from logbroker.metadata import Command, SetQueueInSync
from replication.queue.epoch_history import EpochHistory
from replication.queue.fetch_protocol import FetchAnswer, FetchRequest
from replication.queue.follower_fetch_driver import FetchFailed, Key
from replication.queue.follower_replica import FollowerReplica
from replication.queue.leader_feed import ProposeInSync
from replication.queue.replication_leader import ReplicationLeader
from segments.log import Log
from segments.memory_filesystem import MemoryFileSystem
from tests.sim.queue_leader import QUEUE_LOG_CONFIG, VHOST, LeaderReplica
from tests.sim.queue_messages import ClusterMessage, Fetch, FetchReply


class SimWorld(Protocol):
    now: int
    rng: random.Random

    def send(self, message: ClusterMessage) -> None: ...

    def request_id(self) -> int: ...


class SimClock:
    def __init__(self, world: SimWorld) -> None:
        self._world = world

    def monotonic_ms(self) -> int:
        return self._world.now

    def wall_ms(self) -> int:
        return self._world.now


@dataclass(eq=False)
class SimTimer:
    action: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class SimTimers:
    _due: list[tuple[int, int, SimTimer]] = field(default_factory=list)
    _seq: int = 0

    def call_at(self, monotonic_ms: int, action: Callable[[], None]) -> SimTimer:
        self._seq += 1
        timer = SimTimer(action)
        heapq.heappush(self._due, (monotonic_ms, self._seq, timer))
        return timer

    def run_due(self, now: int) -> None:
        """Run every timer due by `now`, those the running ones set for `now` included."""
        while self._due and self._due[0][0] <= now:
            timer = heapq.heappop(self._due)[2]
            if not timer.cancelled:
                timer.action()


class SimFetchTransport:
    def __init__(self, node: str, world: SimWorld) -> None:
        self._node = node
        self._world = world
        self._waiting: dict[int, Callable[[FetchAnswer | FetchFailed], None]] = {}

    def fetch(self, leader: str, key: Key, request: FetchRequest,
              on_answer: Callable[[FetchAnswer | FetchFailed], None]) -> None:
        request_id = self._world.request_id()
        self._waiting[request_id] = on_answer
        self._world.send(Fetch(self._node, leader, request_id, key[1], request))

    def answered(self, reply: FetchReply) -> None:
        on_answer = self._waiting.pop(reply.request, None)
        if on_answer is not None:
            on_answer(reply.answer)


class SimDisk:
    def __init__(self, fs: MemoryFileSystem, timers: SimTimers, world: SimWorld,
                 max_sync_delay: int) -> None:
        self._fs = fs
        self._timers = timers
        self._world = world
        self._max_sync_delay = max_sync_delay
        self._syncing: dict[FollowerReplica, SimTimer] = {}

    def open(self, key: Key) -> FollowerReplica:
        return FollowerReplica.open(self._fs, f"/queues/{key[1]}", QUEUE_LOG_CONFIG)

    def sync(self, replica: FollowerReplica, done: Callable[[Exception | None], None]
             ) -> None:
        def synced() -> None:
            self._syncing.pop(replica, None)
            replica.sync()
            done(None)
        delay = self._world.rng.randint(0, self._max_sync_delay)
        self._syncing[replica] = self._timers.call_at(self._world.now + delay, synced)

    def settle(self, replica: FollowerReplica) -> None:
        """A sync under way finishes now (a stop waits for the fsync thread)."""
        timer = self._syncing.pop(replica, None)
        if timer is not None:
            timer.cancel()
            replica.sync()


@dataclass
class _Parked:
    shell: LeaderReplica
    changes: int
    deadline: int
    wake: Callable[[], None]


class SimParking:
    def __init__(self, leaders: dict[str, LeaderReplica]) -> None:
        self._leaders = leaders
        self._parked: list[_Parked] = []

    def park(self, shell: LeaderReplica, deadline_ms: int, wake: Callable[[], None]) -> None:
        self._parked.append(_Parked(shell, shell.changes, deadline_ms, wake))

    def wake_parked(self, now: int) -> None:
        """Wake the fetches whose queue changed (or was replaced) or whose wait ran out."""
        parked, self._parked = self._parked, []
        for entry in parked:
            shell = entry.shell
            if (self._leaders.get(shell.queue) is not shell or shell.changes != entry.changes
                    or now >= entry.deadline):
                entry.wake()
            else:
                self._parked.append(entry)


class SimLedQueue:
    """`LedQueue` over a simulated leader (its `moved` also releases confirms)."""

    def __init__(self, shell: LeaderReplica, parking: SimParking) -> None:
        self._shell = shell
        self._parking = parking

    @property
    def fenced(self) -> str | None:
        return self._shell.gate.fenced

    @property
    def leader(self) -> ReplicationLeader:
        return self._shell.gate.leader

    @property
    def history(self) -> EpochHistory:
        return self._shell.gate.history

    @property
    def acked_version(self) -> int:
        return self._shell.gate.acked_version

    @property
    def log_start(self) -> int:
        return self._shell.log.log_start_offset

    @property
    def log(self) -> Log:
        return self._shell.log

    @property
    def sync_batch_size(self) -> int:
        return self._shell.gate.sync_batch_size

    def acked_ranges(self) -> list[tuple[int, int]]:
        return self._shell.cursor.acked.ranges()

    def moved(self, change: Callable[[], object]) -> None:
        self._shell.moved(change)

    def park(self, deadline_ms: int, wake: Callable[[], None]) -> None:
        self._parking.park(self._shell, deadline_ms, wake)


class SimFeedQueues:
    def __init__(self, leaders: dict[str, LeaderReplica], parking: SimParking) -> None:
        self._leaders = leaders
        self._parking = parking

    def led(self, key: Key) -> SimLedQueue | None:
        shell = self._leaders.get(key[1])
        if shell is None or shell.closed:
            return None
        return SimLedQueue(shell, self._parking)

    def all_led(self) -> list[tuple[Key, SimLedQueue]]:
        return [((VHOST, name), SimLedQueue(shell, self._parking))
                for name, shell in self._leaders.items() if not shell.closed]


class Proposer(Protocol):
    id: str

    def propose(self, command: Command, done: Callable[[bool], None] | None = None
                ) -> None: ...

    def log(self, text: str) -> None: ...


class SimInSyncProposer:
    def __init__(self, node: Proposer) -> None:
        self._node = node

    def propose_in_sync(self, proposal: ProposeInSync, done: Callable[[bool], None]) -> None:
        node = self._node
        node.log(f"{node.id} proposes in sync {list(proposal.in_sync)} for "
                 f"{proposal.key[1]} (epoch {proposal.epoch})")
        node.propose(SetQueueInSync(*proposal.key, proposal.epoch, proposal.in_sync), done)
