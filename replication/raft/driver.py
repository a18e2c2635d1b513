"""`RaftDriver`: the asyncio shell that runs a `RaftNode` over a `RaftStorage`.

Theory of operation. The core (`RaftNode`) does no I/O and reads no clock; the
driver gives it both, on the event loop's thread:

- Time: a `loop.call_later` timer calls `node.tick()` every `tick_interval_s`
  (the core counts election and heartbeat timeouts in ticks).
- Input: `step(message)` for what the network delivers, `propose(...)`,
  `propose_config_change(...)` and `transfer_leadership(...)` for clients.
- Output: each of those schedules one `_process_ready` with `loop.call_soon`
  (coalesced: at most one is pending), which drains the node's `Ready`
  batches in the order `ready.py` prescribes: persist (`storage.save`, with
  its fsync - synchronous, acceptable for low-rate metadata), then send the
  messages (persist before send: a vote or an acknowledgement must be durable
  before anyone sees it), then restore the state machine from a received
  snapshot, then apply the committed entries in order, then `node.advance`.

Applying. NORMAL entries go to `state_machine.apply(index, data)`; its result
(or the exception it raised) goes to the proposer if this node proposed that
entry, and is otherwise dropped (an exception is logged at debug: every node
applies the same entries, and a deterministic failure is part of the state).
CONFIG entries are reported to `on_membership_change`; NOOPs are skipped.

Proposals (`proposals.py`) wait by index for their entry to be applied: the
same term resolves them, another term drops them, and so does losing
leadership before the entry commits (ProposalDropped: fate unknown - it may
still commit under the next leader). Every wait is bounded by a timeout, and
at most `max_pending_proposals` wait at once (ProposalRefused beyond).

Snapshots. Once `snapshot_every` entries were applied past the log's
snapshot point, the driver takes `state_machine.snapshot()`, compacts the core
(`node.compact`) and persists it (`storage.save_snapshot`); followers too far
behind are then sent it. `open` restores the state machine from the persisted
snapshot, and the core replays the committed entries after it.

Failure. An OSError or StorageError while persisting (or an exception from
the core or from `restore`) is fatal: the driver logs it at ERROR, stops
ticking and stepping, fails every waiter and makes later requests raise
`DriverStopped` (a ProposalDropped, as is what `stop` fails waiters with).
It never carries on from a state it could not make durable.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable

from replication.raft.applier import Applier, RaftStateMachine
from replication.raft.config import RaftConfig
from replication.raft.errors import NotLeader, ProposalRefused
from replication.raft.membership import ConfigChange, Membership
from replication.raft.messages import Message, Snapshot
from replication.raft.node import RaftNode
from replication.raft.proposals import (
    AppliedWaiters,
    DriverStopped,
    ProposalDropped,
    ProposalTable,
    ProposalTimeout,
)
from replication.raft.ready import Ready, Role, SoftState
from replication.raft.storage import RaftStorage
from segments.errors import StorageError
from segments.filesystem import FileSystem

__all__ = [
    "DriverStopped",
    "NotLeader",
    "ProposalDropped",
    "ProposalRefused",
    "ProposalTimeout",
    "RaftDriver",
    "RaftStateMachine",
]

logger = logging.getLogger(__name__)

MAX_PENDING_PROPOSALS = 10_000
# Readies drained per callback before yielding to the loop (a synchronous
# transport could otherwise keep one callback busy for ever).
_READIES_PER_CALLBACK = 64


class RaftDriver:
    def __init__(
        self,
        node: RaftNode,
        storage: RaftStorage,
        state_machine: RaftStateMachine,
        send: Callable[[Message], None],
        *,
        applied_index: int,
        tick_interval_s: float,
        snapshot_every: int,
        max_pending_proposals: int = MAX_PENDING_PROPOSALS,
    ) -> None:
        """Use `open`; this takes a node already built from `storage`'s state."""
        if tick_interval_s <= 0:
            raise ValueError("tick_interval_s must be positive")
        self._node = node
        self._storage = storage
        self._send = send
        self._tick_interval_s = tick_interval_s
        self._proposals = ProposalTable(max_pending_proposals)
        self._applier = Applier(node.id, state_machine, self._proposals,
                                self._notify_membership, applied_index=applied_index,
                                snapshot_every=snapshot_every)
        self._applied_waiters = AppliedWaiters()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._scheduled = False
        self._stopped = False
        self._failure: BaseException | None = None
        self.on_role_change: Callable[[SoftState], None] | None = None
        self.on_membership_change: Callable[[Membership], None] | None = None

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        directory: str,
        node_id: str,
        founding: Membership,
        state_machine: RaftStateMachine,
        send: Callable[[Message], None],
        *,
        config: RaftConfig = RaftConfig(),  # noqa: B008 - frozen, hence shareable
        rng: random.Random | None = None,
        tick_interval_s: float = 0.05,
        snapshot_every: int = 1000,
        max_pending_proposals: int = MAX_PENDING_PROPOSALS,
    ) -> RaftDriver:
        """Open (or create) the node's storage under `directory` and recover from it.

        `founding` founds a new group (the same on every founder) and is ignored
        once anything was persisted; a node joining an existing group passes
        EMPTY_MEMBERSHIP and learns the membership from the leader.
        """
        storage = RaftStorage.open(fs, directory)
        try:
            restored = storage.load()
            applied_index = 0
            if restored is not None and restored.snapshot is not None:
                snapshot = restored.snapshot
                state_machine.restore(snapshot.index, snapshot.data)
                applied_index = snapshot.index
            node = RaftNode(node_id, founding, config, rng or random.Random(), restored)
        except BaseException:
            storage.close()
            raise
        return cls(node, storage, state_machine, send, applied_index=applied_index,
                   tick_interval_s=tick_interval_s, snapshot_every=snapshot_every,
                   max_pending_proposals=max_pending_proposals)

    # ------------------------------------------------------------ properties

    @property
    def node_id(self) -> str:
        return self._node.id

    @property
    def leader_id(self) -> str | None:
        return self._node.leader_id

    @property
    def role(self) -> Role:
        return self._node.role

    @property
    def term(self) -> int:
        return self._node.term

    @property
    def commit_index(self) -> int:
        return self._node.commit_index

    @property
    def committed_own_term(self) -> bool:
        """On a leader: its commit index is the cluster's (Raft's read-index condition)."""
        return self._node.committed_own_term

    @property
    def applied_index(self) -> int:
        """The last index the state machine has applied (or restored a snapshot of)."""
        return self._applier.applied_index

    @property
    def membership(self) -> Membership:
        """The latest membership in the log (in force even before it commits)."""
        return self._node.membership

    @property
    def membership_committed(self) -> bool:
        return self._node.membership_committed

    def is_voter(self, node_id: str) -> bool:
        return node_id in self._node.membership.voters

    @property
    def is_leader(self) -> bool:
        return self._node.role is Role.LEADER

    @property
    def node(self) -> RaftNode:
        """The core, for inspection only: changing it bypasses the driver."""
        return self._node

    # ------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start ticking; call from inside the running loop."""
        self._check_usable()
        if self._timer is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._timer = self._loop.call_later(self._tick_interval_s, self._on_tick)
        self._schedule()  # a fresh founder has its first entry to persist

    async def stop(self) -> None:
        """Stop ticking, fail what is waiting, close the storage. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._halt(DriverStopped(f"{self.node_id}: the driver stopped"))
        try:
            self._storage.close()
        except (OSError, StorageError):
            logger.exception("%s: closing the Raft storage failed", self.node_id)

    def _halt(self, error: DriverStopped) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._proposals.fail_all(error)
        self._applied_waiters.fail_all(error)

    def _fail(self, error: BaseException, what: str) -> None:
        """A fatal error: stop everything but the storage (closed by `stop`)."""
        logger.error("%s: %s failed; the Raft driver stops: %r", self.node_id, what, error,
                     exc_info=error)
        self._failure = error
        stopped = DriverStopped(f"{self.node_id}: {what} failed: {error!r}")
        stopped.__cause__ = error
        self._halt(stopped)

    def _check_usable(self) -> None:
        if self._failure is not None:
            raise DriverStopped(
                f"{self.node_id}: the driver failed: {self._failure!r}"
            ) from self._failure
        if self._stopped:
            raise DriverStopped(f"{self.node_id}: the driver is stopped")

    @property
    def _running(self) -> bool:
        return not self._stopped and self._failure is None

    # ------------------------------------------------------------------ input

    def _on_tick(self) -> None:
        self._timer = None
        if not self._running:
            return
        try:
            self._node.tick()
        except Exception as error:
            self._fail(error, "tick")
            return
        assert self._loop is not None
        self._timer = self._loop.call_later(self._tick_interval_s, self._on_tick)
        self._schedule()

    def step(self, message: Message) -> None:
        """Take a message from the network (those meant for another node are ignored)."""
        if message.target != self._node.id:
            logger.debug("%s: ignoring a message for %s", self.node_id, message.target)
            return
        if not self._running:
            return
        try:
            self._node.step(message)
        except Exception as error:
            self._fail(error, f"stepping {type(message).__name__} from {message.source}")
            return
        self._schedule()

    async def propose(self, data: bytes, timeout_s: float = 5.0) -> object:
        """Replicate `data`; its `apply` result once committed and applied here.

        Raises NotLeader (with `leader_hint`) on a follower, ProposalRefused if
        the leader cannot take it now, the exception `apply` raised,
        ProposalDropped if the entry was lost (or may have been), ProposalTimeout.
        """
        self._check_usable()
        self._proposals.check_capacity()
        index = self._node.propose(data)
        return await self._await_proposal(index, timeout_s)

    async def propose_config_change(self, change: ConfigChange, timeout_s: float = 5.0) -> None:
        """Apply one single-server membership change; returns once it is applied here.

        Raises ConfigChangeError if it changes nothing, and otherwise as `propose`.
        """
        self._check_usable()
        self._proposals.check_capacity()
        index = self._node.propose_config_change(change)
        await self._await_proposal(index, timeout_s)

    async def _await_proposal(self, index: int, timeout_s: float) -> object:
        waiting = self._proposals.wait(index, self._node.term, timeout_s, self.node_id)
        self._schedule()
        return await waiting

    async def wait_applied(self, index: int, timeout_s: float) -> None:
        """Return once this node applied `index` (ProposalTimeout after `timeout_s`)."""
        self._check_usable()
        if self._applier.applied_index < index:
            await self._applied_waiters.wait(index, timeout_s, self.node_id)

    def transfer_leadership(self, target: str) -> None:
        """Hand leadership to voter `target` (best effort). NotLeader on a follower."""
        self._check_usable()
        self._node.transfer_leadership(target)
        self._schedule()

    # ------------------------------------------------------------------ ready

    def _schedule(self) -> None:
        if self._scheduled or not self._running:
            return
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        self._scheduled = True
        self._loop.call_soon(self._process_ready)

    def _process_ready(self) -> None:
        self._scheduled = False
        for _ in range(_READIES_PER_CALLBACK):
            if not self._running or not self._node.has_ready():
                return
            try:
                self._handle(self._node.ready())
            except Exception as error:  # a bug in the core or in storage: stop, loudly
                self._fail(error, "processing a Ready")
                return
        self._schedule()

    def _handle(self, ready: Ready) -> None:
        try:
            self._storage.save(ready)
        except (OSError, StorageError) as error:
            self._fail(error, "persisting Raft state")
            return
        for message in ready.messages:
            try:
                self._send(message)
            except Exception:
                # The network may lose messages anyway; Raft resends what matters.
                logger.warning("%s: sending %s failed", self.node_id, type(message).__name__,
                               exc_info=True)
        if ready.snapshot is not None and not self._restore(ready.snapshot):
            return
        for entry in ready.committed_entries:
            self._applier.apply(entry)
        self._node.advance(ready)
        if ready.soft_state is not None:
            self._on_soft_state(ready.soft_state)
        self._applied_waiters.advance(self._applier.applied_index)
        try:
            self._applier.maybe_compact(self._node, self._storage)
        except (OSError, StorageError) as error:
            self._fail(error, "persisting a snapshot")

    def _restore(self, snapshot: Snapshot) -> bool:
        try:
            self._applier.restore(snapshot)
        except Exception as error:
            self._fail(error, f"restoring snapshot {snapshot.index}")
            return False
        return True

    def _on_soft_state(self, soft_state: SoftState) -> None:
        if soft_state.role is not Role.LEADER:
            self._proposals.drop_uncommitted(
                self._node.commit_index, f"{self.node_id} is no longer the leader"
            )
        if self.on_role_change is not None:
            try:
                self.on_role_change(soft_state)
            except Exception:
                logger.exception("%s: on_role_change failed", self.node_id)

    def _notify_membership(self, membership: Membership) -> None:
        if self.on_membership_change is not None:
            try:
                self.on_membership_change(membership)
            except Exception:
                logger.exception("%s: on_membership_change failed", self.node_id)
