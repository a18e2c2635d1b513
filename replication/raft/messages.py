"""Log entries, snapshots and the messages Raft nodes exchange.

Every message names its `source`, its `target` and the sender's `term`; the
receiver compares terms before anything else (see `node.py`). Messages are
immutable values: the simulation may deliver one twice or never.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from replication.raft.membership import Membership


class EntryKind(IntEnum):
    NORMAL = 0  # an application command
    CONFIG = 1  # `data` is an encoded Membership, in force from when it is appended
    NOOP = 2  # appended by each new leader so it can commit entries of older terms


@dataclass(frozen=True, slots=True)
class Entry:
    term: int
    index: int
    kind: EntryKind
    data: bytes = b""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The applied state up to and including `index`, and the membership in force there."""

    index: int
    term: int
    membership: Membership
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    source: str
    target: str
    term: int


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteRequestBase(Message):
    last_log_index: int
    last_log_term: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PreVote(VoteRequestBase):
    """'Would you vote for me?' `term` is the term the sender would campaign in.

    Receivers change no state for it, so a node that cannot win (partitioned,
    removed, or behind) never makes the others bump their term.
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestVote(VoteRequestBase):
    # Set when the leader handed leadership over (TimeoutNow): voters then
    # ignore that they heard from that leader recently.
    transfer: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteResponseBase(Message):
    granted: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class PreVoteResponse(VoteResponseBase):
    """`term` is the requested term if granted, the responder's term if not."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestVoteResponse(VoteResponseBase):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendEntries(Message):
    prev_log_index: int
    prev_log_term: int
    entries: tuple[Entry, ...]
    leader_commit: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendEntriesResponse(Message):
    """On success `match_index` is the last index now known to equal the leader's.

    On rejection, `reject_index` is the request's `prev_log_index` (so the
    leader can tell a stale rejection), and the hint lets the leader skip a
    whole term per round trip: `conflict_term` is the follower's term at
    `reject_index` and `conflict_index` the first index it holds of that term;
    if the follower's log is too short, `conflict_term` is None and
    `conflict_index` is its last index + 1.
    """

    success: bool
    match_index: int = 0
    reject_index: int = 0
    conflict_term: int | None = None
    conflict_index: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat(Message):
    """Keeps followers from campaigning; carries a commit index they are known to hold.

    `round` counts the leader's heartbeats; the follower echoes it, so the
    leader can tell an append that was sent before this heartbeat and never
    acknowledged: lost.
    """

    leader_commit: int
    round: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatResponse(Message):
    round: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class InstallSnapshot(Message):
    snapshot: Snapshot


@dataclass(frozen=True, slots=True, kw_only=True)
class InstallSnapshotResponse(Message):
    match_index: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeoutNow(Message):
    """From a leader handing over: campaign now, without pre-vote."""


def describe(message: Message) -> str:
    """One short line per message, for traces."""
    head = f"{message.source}->{message.target} {type(message).__name__} t{message.term}"
    match message:
        case VoteRequestBase():
            return f"{head} last=({message.last_log_index},{message.last_log_term})"
        case VoteResponseBase():
            return f"{head} {'granted' if message.granted else 'rejected'}"
        case AppendEntries():
            count = len(message.entries)
            return (f"{head} prev=({message.prev_log_index},{message.prev_log_term})"
                    f" n={count} commit={message.leader_commit}")
        case AppendEntriesResponse() if message.success:
            return f"{head} ok match={message.match_index}"
        case AppendEntriesResponse():
            return (f"{head} reject={message.reject_index}"
                    f" hint=({message.conflict_index},{message.conflict_term})")
        case Heartbeat():
            return f"{head} commit={message.leader_commit}"
        case InstallSnapshot():
            return f"{head} index={message.snapshot.index}"
        case InstallSnapshotResponse():
            return f"{head} match={message.match_index}"
    return head
