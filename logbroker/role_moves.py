"""`RoleMoves`: which role this node takes for each replicated queue, and the steps between.

Theory of operation. The metadata names each replicated queue's leader,
members and epoch. After every change of a queue's record the driver calls
`sync(key, view, current)` with what this node has for the queue (`Holding`:
an open leader shell, a follower replica, both or neither) and the core
answers with the next step of the move that brings the node in line with
the record:

- leader here: a shell that leads as recorded (replicated as the record
  says, of the record's epoch) stays, and a changed replica set of the same
  epoch is handed to its gate (`HandMembers`, or `HandInSync` for an in-sync
  change applied while the metadata was not current); any other shell is
  closed, fenced (`CloseShell`); a follower replica stops and gives the
  high watermark it knew (`StopFollowing`); then, for a replicated queue, the
  copy's own epoch history is read (`ReadCopyEpoch`): a copy that already led
  the record's epoch (a restart, a reopen) leads again from a new epoch
  (`ProposeEpoch`), so an in-sync change its old incarnation proposed is
  refused by the epoch check; otherwise the queue opens as leader of the
  record's epoch from that high watermark (`OpenLeader`);
- follower here: a shell this node led is closed, fenced; then `Follow`;
- neither (not a member any more, or the queue is gone): close the shell,
  stop following and delete the copy (`Forget`).

`CloseShell`, `StopFollowing` and `ReadCopyEpoch` lead to another decision
on the view as it is when they are done (`done`); `OpenLeader`,
`ProposeEpoch` and `Forget` end the move. A move ends deferred when the
open finds a copy newer than the record (`StaleEpoch`) or the new epoch is
not committed: it is made again at the next `catch_up`. Until the metadata is
current (a restarted node replaying its log), `sync` defers too: acting on
an old record would open a queue for an epoch that has ended.

Invariants:
- one move at a time per queue: while a step is awaited, a `sync` only
  marks the move to be decided once more when the step is done, on the view
  as it is then (so a burst of changes ends in the state of the last one);
- never a leader shell of an older epoch open beside a newer one: the core
  asks for `OpenLeader` only when the view shows no shell and no follower
  replica of the queue here;
- the high watermark a stopped follower gave goes to the `OpenLeader` of the
  same move, and nowhere else;
- a deferred queue is made again only once the metadata is current;
- the core reads no clock, file or socket: the driver carries every step
  out and reports it back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from logbroker.metadata import ElectQueueLeader, QueueRecord

Key = tuple[str, str]  # (vhost, queue name)


@dataclass(frozen=True, slots=True)
class LeaderShell:
    """The queue shell open here, as the roles see it."""

    replicated: bool
    epoch: int | None = None  # None: not replicated (no gate)
    members: tuple[str, ...] = ()
    in_sync: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Holding:
    """What this node has for a queue when the core decides."""

    shell: LeaderShell | None = None
    following: bool = False


# ------------------------------------------------------------------- effects

@dataclass(frozen=True, slots=True)
class CloseShell:
    """Step: fence and close the shell (its consumers are cancelled), keep the files."""

    key: Key
    reason: str


@dataclass(frozen=True, slots=True)
class StopFollowing:
    """Step: stop following and close the replica; done with the high watermark it knew."""

    key: Key


@dataclass(frozen=True, slots=True)
class ReadCopyEpoch:
    """Step: the latest epoch of this node's copy (`EpochHistory`), for `epoch`."""

    key: Key
    epoch: int


@dataclass(frozen=True, slots=True)
class ProposeEpoch:
    """Step: lead again from a new epoch."""

    key: Key
    command: ElectQueueLeader


@dataclass(frozen=True, slots=True)
class OpenLeader:
    """Step: open the queue as leader of the record's epoch."""

    key: Key
    high_watermark: int | None  # what the stopped follower knew; None: unknown


@dataclass(frozen=True, slots=True)
class Forget:
    """Step: stop following and delete the copy."""

    key: Key


@dataclass(frozen=True, slots=True)
class Follow:
    key: Key


@dataclass(frozen=True, slots=True)
class HandMembers:
    """The open leader's replica set changed in the same epoch: hand it to its gate."""

    key: Key
    members: tuple[str, ...]
    in_sync: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HandInSync:
    """An in-sync change applied while the metadata was not current: hand it over now."""

    key: Key
    in_sync: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Settled:
    """The move that awaited steps is over (whoever waits for it may go on)."""

    key: Key


@dataclass(frozen=True, slots=True)
class Notice:
    level: int
    text: str
    count: str | None = None  # a statistic this notice counts


Step = CloseShell | StopFollowing | ReadCopyEpoch | ProposeEpoch | OpenLeader | Forget
RoleEffect = Step | Follow | HandMembers | HandInSync | Settled | Notice


# ------------------------------------------------------------------ outcomes

@dataclass(frozen=True, slots=True)
class Closed:
    pass


@dataclass(frozen=True, slots=True)
class Stopped:
    high_watermark: int | None


@dataclass(frozen=True, slots=True)
class CopyRead:
    latest_epoch: int | None  # None: unreadable


@dataclass(frozen=True, slots=True)
class EpochProposed:
    refusal: str | None  # None: committed


@dataclass(frozen=True, slots=True)
class Opened:
    stale: str | None = None  # the copy holds a newer epoch than the record: why


@dataclass(frozen=True, slots=True)
class Forgotten:
    pass


@dataclass(frozen=True, slots=True)
class StepFailed:
    reason: str


Outcome = Closed | Stopped | CopyRead | EpochProposed | Opened | Forgotten | StepFailed


@dataclass
class _Move:
    awaiting: Step
    again: bool = False  # a sync came while the step was awaited
    high_watermark: int | None = None
    copy: tuple[int, bool] | None = None  # (record epoch, the copy led it)


class RoleMoves:
    def __init__(self, node: str) -> None:
        self.node = node
        self._moves: dict[Key, _Move] = {}
        self.deferred: set[Key] = set()

    def moving(self, key: Key) -> bool:
        return key in self._moves

    # ---------------------------------------------------------------- events

    def sync(self, key: Key, record: QueueRecord | None, holding: Holding, current: bool
             ) -> list[RoleEffect]:
        """The queue's record changed (or is to be checked): the next step, if any."""
        if not current:
            return self._defer(key)
        move = self._moves.get(key)
        if move is not None:
            move.again = True
            return []
        return self._decide(key, record, holding, None)

    def catch_up(self, current: bool) -> list[Key]:
        """The queues whose moves waited, to `sync` now that the metadata is current."""
        if not self.deferred or not current:
            return []
        deferred, self.deferred = self.deferred, set()
        return sorted(deferred)

    def done(self, key: Key, outcome: Outcome, record: QueueRecord | None, holding: Holding
             ) -> list[RoleEffect]:
        """The awaited step of the queue's move is done; `record` and `holding` are as
        they are now."""
        move = self._moves.get(key)
        if move is None:
            return []  # not ours (the driver was rebuilt meanwhile)
        effects: list[RoleEffect] = []
        if isinstance(outcome, Stopped):
            move.high_watermark = outcome.high_watermark
        elif isinstance(outcome, CopyRead):
            assert isinstance(move.awaiting, ReadCopyEpoch)
            led = outcome.latest_epoch is None or outcome.latest_epoch == move.awaiting.epoch
            move.copy = (move.awaiting.epoch, led)  # unreadable: a new epoch is the safe side
        elif not isinstance(outcome, Closed):
            effects = self._ended(key, outcome)
            if not move.again:
                return [*effects, *self._settle(key)]
        return [*effects, *self._decide(key, record, holding, move)]

    # ------------------------------------------------------------- decisions

    def _decide(self, key: Key, record: QueueRecord | None, holding: Holding,
                move: _Move | None) -> list[RoleEffect]:
        if move is not None:
            move.again = False
        if record is not None and record.leader_node == self.node:
            return self._lead(key, record, holding, move)
        shell = holding.shell
        if shell is not None:
            epoch = record.epoch if record is not None else "none"
            return self._step(key, move, CloseShell(
                key, f"node {self.node} no longer leads the queue (epoch {epoch})"))
        if record is not None and record.replicated and self.node in record.members:
            return [Follow(key), *self._settle(key)]
        if holding.following:
            return self._step(key, move, Forget(key))
        return self._settle(key)

    def _lead(self, key: Key, record: QueueRecord, holding: Holding, move: _Move | None
              ) -> list[RoleEffect]:
        shell = holding.shell
        if shell is not None:
            if _leads_as_recorded(shell, record):
                return [*_hand_replica_set(key, shell, record), *self._settle(key)]
            # A new epoch, or the queue became (or stopped being) replicated.
            return self._step(key, move, CloseShell(key, f"epoch {record.epoch} began"))
        if holding.following:
            return self._step(key, move, StopFollowing(key))
        if record.replicated:
            copy = move.copy if move is not None else None
            if copy is None or copy[0] != record.epoch:
                return self._step(key, move, ReadCopyEpoch(key, record.epoch))
            if copy[1]:
                return self._new_epoch(key, record, move)
        high_watermark = move.high_watermark if move is not None else None
        notice = Notice(logging.INFO, f"node {self.node} leads queue {key[1]!r} in vhost "
                        f"{key[0]!r} (epoch {record.epoch})")
        return [notice, *self._step(key, move, OpenLeader(key, high_watermark))]

    def _new_epoch(self, key: Key, record: QueueRecord, move: _Move | None
                   ) -> list[RoleEffect]:
        in_sync = (self.node, *(n for n in record.in_sync if n != self.node))
        command = ElectQueueLeader(record.vhost, record.name, record.epoch, self.node, in_sync,
                                   out_of_sync=self.node not in record.in_sync)
        notice = Notice(logging.INFO, f"node {self.node} led queue {key[1]!r} in vhost "
                        f"{key[0]!r} at epoch {record.epoch} before: starting epoch "
                        f"{record.epoch + 1}", "new_epochs_on_reopen")
        return [notice, *self._step(key, move, ProposeEpoch(key, command))]

    def _ended(self, key: Key, outcome: Outcome) -> list[RoleEffect]:
        """What a move's last step came to: deferred when it must wait for newer metadata."""
        if isinstance(outcome, Opened) and outcome.stale is not None:
            # Our copy is newer than the record we acted on: wait for newer metadata.
            return [Notice(logging.INFO, f"queue {key[1]!r} in vhost {key[0]!r} not opened "
                           f"yet: {outcome.stale}", "stale_epoch_opens"), *self._defer(key)]
        if isinstance(outcome, EpochProposed) and outcome.refusal is not None:
            return [Notice(logging.WARNING, f"queue {key[1]!r}: a new epoch was not "
                           f"committed ({outcome.refusal}); retrying later"),
                    *self._defer(key)]
        if isinstance(outcome, StepFailed):
            return [Notice(logging.ERROR, f"queue {key[1]!r} in vhost {key[0]!r}: replica "
                           f"role change failed: {outcome.reason}")]
        return []

    # ----------------------------------------------------------- bookkeeping

    def _step(self, key: Key, move: _Move | None, step: Step) -> list[RoleEffect]:
        if move is None:
            self._moves[key] = _Move(step)
        else:
            move.awaiting = step
        return [step]

    def _settle(self, key: Key) -> list[RoleEffect]:
        return [Settled(key)] if self._moves.pop(key, None) is not None else []

    def _defer(self, key: Key) -> list[RoleEffect]:
        if key in self.deferred:
            return []
        self.deferred.add(key)
        return [Notice(logging.DEBUG, f"queue {key[1]!r} in vhost {key[0]!r}: move deferred",
                       "moves_deferred")]


def _leads_as_recorded(shell: LeaderShell, record: QueueRecord) -> bool:
    """Whether the open shell is the leader the record names: replicated as the record
    says, and (replicated) of the record's epoch."""
    if shell.replicated != record.replicated:
        return False
    return shell.epoch is None or shell.epoch == record.epoch


def _hand_replica_set(key: Key, shell: LeaderShell, record: QueueRecord) -> list[RoleEffect]:
    if shell.epoch is None:
        return []
    if shell.members != record.members:
        return [HandMembers(key, record.members, record.in_sync)]
    if shell.in_sync != record.in_sync:
        return [HandInSync(key, record.in_sync)]
    return []
