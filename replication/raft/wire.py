"""The binary wire format of Raft messages: `encode_message` / `decode_message`.

Layout (all integers little-endian, unsigned):

    message   = version u8 | type u8 | source str | target str | term u64 | body
    str       = length u16 | utf-8 bytes
    blob      = length u32 | bytes
    bool      = u8 (0 or 1, anything else is rejected)
    entry     = term u64 | index u64 | kind u8 | data blob
    snapshot  = index u64 | term u64 | membership | data blob
    membership= voter_count u16 | str* | learner_count u16 | str*   (each set sorted)

Bodies per type (the `_Type` codes below):

    PreVote, RequestVote      last_log_index u64 | last_log_term u64 [| transfer bool]
    PreVoteResponse,
    RequestVoteResponse       granted bool
    AppendEntries             prev_log_index u64 | prev_log_term u64 | leader_commit u64
                              | entry_count u32 | entry*
    AppendEntriesResponse     success bool | match_index u64 | reject_index u64
                              | has_conflict_term bool [| conflict_term u64] | conflict_index u64
    Heartbeat                 leader_commit u64 | round u64
    HeartbeatResponse         round u64
    InstallSnapshot           snapshot
    InstallSnapshotResponse   match_index u64
    TimeoutNow                (nothing)

The membership is encoded here rather than with `Membership.encode` (JSON), so
decoding never has to trust a document's shape. Decoding is strict, and each
message has exactly one encoding: an unknown version or type, a short read,
bytes left over, invalid utf-8, a boolean other than 0 or 1, an unknown entry
kind, unsorted or repeated membership names, a node both voter and learner,
or AppendEntries whose entries do not follow `prev_log_index` one by one all
raise `WireDecodeError` - and nothing else - so a transport can drop a bad
frame and carry on. Encoding a message whose fields do not fit (a negative or
>= 2**64 integer, a node id longer than 65535 bytes) raises ValueError.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from enum import IntEnum

from replication.raft.membership import Membership
from replication.raft.messages import (
    AppendEntries,
    AppendEntriesResponse,
    Entry,
    EntryKind,
    Heartbeat,
    HeartbeatResponse,
    InstallSnapshot,
    InstallSnapshotResponse,
    Message,
    PreVote,
    PreVoteResponse,
    RequestVote,
    RequestVoteResponse,
    Snapshot,
    TimeoutNow,
)

WIRE_VERSION = 1

_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class WireDecodeError(ValueError):
    """The bytes are not a message this codec wrote."""


class _Type(IntEnum):
    PRE_VOTE = 1
    REQUEST_VOTE = 2
    PRE_VOTE_RESPONSE = 3
    REQUEST_VOTE_RESPONSE = 4
    APPEND_ENTRIES = 5
    APPEND_ENTRIES_RESPONSE = 6
    HEARTBEAT = 7
    HEARTBEAT_RESPONSE = 8
    INSTALL_SNAPSHOT = 9
    INSTALL_SNAPSHOT_RESPONSE = 10
    TIMEOUT_NOW = 11


# --------------------------------------------------------------------- encoding


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def u8(self, value: int) -> None:
        self.parts.append(_U8.pack(value))

    def u32(self, value: int) -> None:
        self.parts.append(_U32.pack(value))

    def u64(self, value: int) -> None:
        self.parts.append(_U64.pack(value))

    def boolean(self, value: bool) -> None:
        self.u8(1 if value else 0)

    def string(self, value: str) -> None:
        raw = value.encode()
        self.parts.append(_U16.pack(len(raw)))
        self.parts.append(raw)

    def blob(self, value: bytes) -> None:
        self.parts.append(_U32.pack(len(value)))
        self.parts.append(bytes(value))

    def names(self, values: frozenset[str]) -> None:
        self.parts.append(_U16.pack(len(values)))
        for value in sorted(values):
            self.string(value)

    def entry(self, entry: Entry) -> None:
        self.u64(entry.term)
        self.u64(entry.index)
        self.u8(int(entry.kind))
        self.blob(entry.data)

    def snapshot(self, snapshot: Snapshot) -> None:
        self.u64(snapshot.index)
        self.u64(snapshot.term)
        self.names(snapshot.membership.voters)
        self.names(snapshot.membership.learners)
        self.blob(snapshot.data)


# Exact classes: a subclass of a message type is not something we could decode.
_TYPES: dict[type[Message], _Type] = {
    PreVote: _Type.PRE_VOTE,
    RequestVote: _Type.REQUEST_VOTE,
    PreVoteResponse: _Type.PRE_VOTE_RESPONSE,
    RequestVoteResponse: _Type.REQUEST_VOTE_RESPONSE,
    AppendEntries: _Type.APPEND_ENTRIES,
    AppendEntriesResponse: _Type.APPEND_ENTRIES_RESPONSE,
    Heartbeat: _Type.HEARTBEAT,
    HeartbeatResponse: _Type.HEARTBEAT_RESPONSE,
    InstallSnapshot: _Type.INSTALL_SNAPSHOT,
    InstallSnapshotResponse: _Type.INSTALL_SNAPSHOT_RESPONSE,
    TimeoutNow: _Type.TIMEOUT_NOW,
}


def encode_message(message: Message) -> bytes:
    """The wire bytes of `message`; ValueError if a field does not fit the format."""
    kind = _TYPES.get(type(message))
    if kind is None:
        raise ValueError(f"cannot encode a {type(message).__name__}")
    w = _Writer()
    try:
        w.u8(WIRE_VERSION)
        w.u8(kind)
        w.string(message.source)
        w.string(message.target)
        w.u64(message.term)
        _encode_body(w, message)
    except (struct.error, UnicodeEncodeError, OverflowError) as error:
        raise ValueError(f"cannot encode {type(message).__name__}: {error}") from error
    return b"".join(w.parts)


def _encode_body(w: _Writer, m: Message) -> None:
    match m:
        case PreVote():
            w.u64(m.last_log_index)
            w.u64(m.last_log_term)
        case RequestVote():
            w.u64(m.last_log_index)
            w.u64(m.last_log_term)
            w.boolean(m.transfer)
        case PreVoteResponse() | RequestVoteResponse():
            w.boolean(m.granted)
        case AppendEntries():
            w.u64(m.prev_log_index)
            w.u64(m.prev_log_term)
            w.u64(m.leader_commit)
            w.u32(len(m.entries))
            for entry in m.entries:
                w.entry(entry)
        case AppendEntriesResponse():
            w.boolean(m.success)
            w.u64(m.match_index)
            w.u64(m.reject_index)
            w.boolean(m.conflict_term is not None)
            if m.conflict_term is not None:
                w.u64(m.conflict_term)
            w.u64(m.conflict_index)
        case Heartbeat():
            w.u64(m.leader_commit)
            w.u64(m.round)
        case HeartbeatResponse():
            w.u64(m.round)
        case InstallSnapshot():
            w.snapshot(m.snapshot)
        case InstallSnapshotResponse():
            w.u64(m.match_index)
        case TimeoutNow():
            pass


# --------------------------------------------------------------------- decoding


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)
        self._position = 0

    def _take(self, size: int) -> memoryview:
        end = self._position + size
        if end > len(self._data):
            raise WireDecodeError(
                f"truncated message: {size} bytes wanted at {self._position}, "
                f"{len(self._data) - self._position} left"
            )
        chunk = self._data[self._position : end]
        self._position = end
        return chunk

    def _unpack(self, layout: struct.Struct) -> int:
        value: int = layout.unpack(self._take(layout.size))[0]
        return value

    def u8(self) -> int:
        return self._unpack(_U8)

    def u16(self) -> int:
        return self._unpack(_U16)

    def u32(self) -> int:
        return self._unpack(_U32)

    def u64(self) -> int:
        return self._unpack(_U64)

    def boolean(self) -> bool:
        value = self.u8()
        if value > 1:
            raise WireDecodeError(f"invalid boolean {value}")
        return value == 1

    def string(self) -> str:
        raw = self._take(self.u16())
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as error:
            raise WireDecodeError(f"invalid utf-8 in a string: {error}") from None

    def blob(self) -> bytes:
        return bytes(self._take(self.u32()))

    def names(self) -> frozenset[str]:
        names = [self.string() for _ in range(self.u16())]
        if any(a >= b for a, b in itertools.pairwise(names)):
            # The encoder sorts them, so that every message has one encoding.
            raise WireDecodeError("membership names out of order or listed twice")
        return frozenset(names)

    def entry(self) -> Entry:
        term, index, kind = self.u64(), self.u64(), self.u8()
        try:
            entry_kind = EntryKind(kind)
        except ValueError:
            raise WireDecodeError(f"unknown entry kind {kind}") from None
        return Entry(term, index, entry_kind, self.blob())

    def snapshot(self) -> Snapshot:
        index, term = self.u64(), self.u64()
        voters, learners = self.names(), self.names()
        try:
            membership = Membership(voters, learners)
        except ValueError as error:
            raise WireDecodeError(f"invalid membership: {error}") from None
        return Snapshot(index, term, membership, self.blob())

    def finish(self) -> None:
        if self._position != len(self._data):
            raise WireDecodeError(
                f"{len(self._data) - self._position} unexpected bytes after the message"
            )


def decode_message(data: bytes) -> Message:
    """The message `encode_message` turned into `data`; WireDecodeError if it is not one."""
    r = _Reader(data)
    version = r.u8()
    if version != WIRE_VERSION:
        raise WireDecodeError(f"unsupported wire version {version}")
    code = r.u8()
    try:
        kind = _Type(code)
    except ValueError:
        raise WireDecodeError(f"unknown message type {code}") from None
    source, target, term = r.string(), r.string(), r.u64()
    message = _DECODERS[kind](r, source, target, term)
    r.finish()
    return message


def _pre_vote(r: _Reader, source: str, target: str, term: int) -> Message:
    return PreVote(source=source, target=target, term=term,
                   last_log_index=r.u64(), last_log_term=r.u64())


def _request_vote(r: _Reader, source: str, target: str, term: int) -> Message:
    return RequestVote(source=source, target=target, term=term,
                       last_log_index=r.u64(), last_log_term=r.u64(), transfer=r.boolean())


def _pre_vote_response(r: _Reader, source: str, target: str, term: int) -> Message:
    return PreVoteResponse(source=source, target=target, term=term, granted=r.boolean())


def _request_vote_response(r: _Reader, source: str, target: str, term: int) -> Message:
    return RequestVoteResponse(source=source, target=target, term=term, granted=r.boolean())


def _append_entries(r: _Reader, source: str, target: str, term: int) -> Message:
    prev_index, prev_term, commit = r.u64(), r.u64(), r.u64()
    count = r.u32()
    entries = []
    for position in range(count):
        entry = r.entry()
        if entry.index != prev_index + 1 + position:
            # The core would reject it with an InvariantError; refuse it here instead.
            raise WireDecodeError(
                f"entry {entry.index} where {prev_index + 1 + position} belongs"
            )
        entries.append(entry)
    return AppendEntries(source=source, target=target, term=term, prev_log_index=prev_index,
                         prev_log_term=prev_term, entries=tuple(entries), leader_commit=commit)


def _append_entries_response(r: _Reader, source: str, target: str, term: int) -> Message:
    success, match_index, reject_index = r.boolean(), r.u64(), r.u64()
    conflict_term = r.u64() if r.boolean() else None
    return AppendEntriesResponse(
        source=source, target=target, term=term, success=success, match_index=match_index,
        reject_index=reject_index, conflict_term=conflict_term, conflict_index=r.u64(),
    )


def _heartbeat(r: _Reader, source: str, target: str, term: int) -> Message:
    return Heartbeat(source=source, target=target, term=term, leader_commit=r.u64(),
                     round=r.u64())


def _heartbeat_response(r: _Reader, source: str, target: str, term: int) -> Message:
    return HeartbeatResponse(source=source, target=target, term=term, round=r.u64())


def _install_snapshot(r: _Reader, source: str, target: str, term: int) -> Message:
    return InstallSnapshot(source=source, target=target, term=term, snapshot=r.snapshot())


def _install_snapshot_response(r: _Reader, source: str, target: str, term: int) -> Message:
    return InstallSnapshotResponse(source=source, target=target, term=term,
                                   match_index=r.u64())


def _timeout_now(r: _Reader, source: str, target: str, term: int) -> Message:
    return TimeoutNow(source=source, target=target, term=term)


_DECODERS: dict[_Type, Callable[[_Reader, str, str, int], Message]] = {
    _Type.PRE_VOTE: _pre_vote,
    _Type.REQUEST_VOTE: _request_vote,
    _Type.PRE_VOTE_RESPONSE: _pre_vote_response,
    _Type.REQUEST_VOTE_RESPONSE: _request_vote_response,
    _Type.APPEND_ENTRIES: _append_entries,
    _Type.APPEND_ENTRIES_RESPONSE: _append_entries_response,
    _Type.HEARTBEAT: _heartbeat,
    _Type.HEARTBEAT_RESPONSE: _heartbeat_response,
    _Type.INSTALL_SNAPSHOT: _install_snapshot,
    _Type.INSTALL_SNAPSHOT_RESPONSE: _install_snapshot_response,
    _Type.TIMEOUT_NOW: _timeout_now,
}
