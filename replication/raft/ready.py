"""What flows between the pure Raft core and its shell.

`Ready` is a batch of effects the shell must carry out, in this order:

1. persist `snapshot` (if any), then `entries` (replacing any persisted
   entries from `entries[0].index` on), then `hard_state` (if any), and
   fsync when `must_sync`;
2. send `messages` - only now: a vote or an acknowledgement must never be
   seen by others before it is durable ("persist before send");
3. restore the application from `snapshot` (if any), then apply
   `committed_entries` in order;
4. call `node.advance(ready)`.

`PersistedState` is what storage hands back to a restarting node.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from replication.raft.messages import Entry, Message, Snapshot


class Role(Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre-candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"


@dataclass(frozen=True, slots=True)
class HardState:
    """What must survive a crash for safety: the term, whom we voted for in it, the commit."""

    term: int = 0
    vote: str | None = None
    commit: int = 0


@dataclass(frozen=True, slots=True)
class SoftState:
    """Volatile facts a shell may want to show or act on."""

    leader_id: str | None
    role: Role


@dataclass(frozen=True, slots=True)
class Ready:
    hard_state: HardState | None
    entries: tuple[Entry, ...]
    snapshot: Snapshot | None
    messages: tuple[Message, ...]
    committed_entries: tuple[Entry, ...]
    soft_state: SoftState | None
    # False when only the commit index changed: it may be written without an fsync,
    # since a node that forgets it relearns it from its leader.
    must_sync: bool

    @property
    def truncate_from(self) -> int | None:
        """The first index whose persisted entry (if any) must be replaced."""
        return self.entries[0].index if self.entries else None


@dataclass(frozen=True, slots=True)
class PersistedState:
    hard_state: HardState
    snapshot: Snapshot | None
    entries: tuple[Entry, ...]
