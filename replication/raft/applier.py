"""The application side of the Raft driver: the state machine, applying, snapshots.

`Applier` hands committed entries to the `RaftStateMachine` in index order,
tells the proposal table (`proposals.py`) what each one produced, restores
the state machine from snapshots and, every `snapshot_every` applied entries,
takes a snapshot of it and compacts the core's log. See `driver.py` for where
these steps sit in the processing of a `Ready`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from replication.raft.membership import Membership
from replication.raft.messages import Entry, EntryKind, Snapshot
from replication.raft.node import RaftNode
from replication.raft.proposals import ProposalTable
from replication.raft.storage import RaftStorage

logger = logging.getLogger(__name__)


class RaftStateMachine(Protocol):
    def apply(self, index: int, data: bytes) -> object:
        """Apply a committed command; the result goes to the proposer (so does an exception).

        Must be deterministic: every node applies the same commands in the same order.
        """
        ...

    def snapshot(self) -> bytes:
        """The whole state, as of the last applied index."""
        ...

    def restore(self, index: int, data: bytes) -> None:
        """Replace the whole state by a snapshot taken at `index`."""
        ...


class Applier:
    def __init__(
        self,
        node_id: str,
        state_machine: RaftStateMachine,
        proposals: ProposalTable,
        notify_membership: Callable[[Membership], None],
        *,
        applied_index: int,
        snapshot_every: int,
    ) -> None:
        if snapshot_every < 0:
            raise ValueError("snapshot_every must be 0 (never) or positive")
        self._node_id = node_id
        self._state_machine = state_machine
        self._proposals = proposals
        self._notify_membership = notify_membership
        self.applied_index = applied_index
        self._snapshot_every = snapshot_every
        self._snapshot_retry_at = 0  # after a failed state_machine.snapshot()

    def restore(self, snapshot: Snapshot) -> None:
        """Replace the state by a snapshot from the leader; exceptions are the caller's."""
        self._state_machine.restore(snapshot.index, snapshot.data)
        self.applied_index = snapshot.index
        self._proposals.drop_through(snapshot.index, "replaced by a snapshot")
        self._notify_membership(snapshot.membership)

    def apply(self, entry: Entry) -> None:
        result: object = None
        error: Exception | None = None
        if entry.kind is EntryKind.NORMAL:
            try:
                result = self._state_machine.apply(entry.index, entry.data)
            except Exception as raised:
                # Every node applies the same entries: a deterministic failure is
                # part of the replicated state, news only to the proposer.
                error = raised
                logger.debug("%s: applying entry %d raised %r", self._node_id, entry.index,
                             raised)
        elif entry.kind is EntryKind.CONFIG:
            self._notify_membership(Membership.decode(entry.data))
        self.applied_index = entry.index
        self._proposals.applied(entry, result, error)

    def maybe_compact(self, node: RaftNode, storage: RaftStorage) -> None:
        """Snapshot and compact once `snapshot_every` entries were applied past the
        log's snapshot point (after `node.advance`). Storage errors are the caller's."""
        log = node.raft_log
        index = log.applied_index
        if (self._snapshot_every == 0 or index - log.snapshot_index < self._snapshot_every
                or index < self._snapshot_retry_at):
            return
        try:
            data = self._state_machine.snapshot()
        except Exception:
            logger.exception("%s: taking a snapshot at %d failed", self._node_id, index)
            self._snapshot_retry_at = index + self._snapshot_every
            return
        storage.save_snapshot(node.compact(index, data))
        logger.debug("%s: compacted the log to %d", self._node_id, index)
