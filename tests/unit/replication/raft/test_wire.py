"""The Raft wire codec: every message type round-trips; garbage only ever raises WireDecodeError."""

import struct
from typing import TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replication.raft import Entry, EntryKind, Membership, Message, Snapshot
from replication.raft.messages import (
    AppendEntries,
    AppendEntriesResponse,
    Heartbeat,
    HeartbeatResponse,
    InstallSnapshot,
    InstallSnapshotResponse,
    PreVote,
    PreVoteResponse,
    RequestVote,
    RequestVoteResponse,
    TimeoutNow,
)
from replication.raft.wire import WIRE_VERSION, WireDecodeError, decode_message, encode_message

U64_MAX = 2**64 - 1


class Head(TypedDict):
    source: str
    target: str
    term: int


HEAD: Head = {"source": "node-1", "target": "nöde-2", "term": 7}
ABC = Membership.of(["a", "b", "c"], ["d"])

EXAMPLES: list[Message] = [
    PreVote(**HEAD, last_log_index=12, last_log_term=6),
    RequestVote(**HEAD, last_log_index=12, last_log_term=6),
    RequestVote(**HEAD, last_log_index=0, last_log_term=0, transfer=True),
    PreVoteResponse(**HEAD, granted=True),
    PreVoteResponse(**HEAD, granted=False),
    RequestVoteResponse(**HEAD, granted=True),
    RequestVoteResponse(**HEAD, granted=False),
    AppendEntries(**HEAD, prev_log_index=4, prev_log_term=3, entries=(), leader_commit=4),
    AppendEntries(
        **HEAD, prev_log_index=4, prev_log_term=3, leader_commit=5,
        entries=(
            Entry(3, 5, EntryKind.NORMAL, b"\x00\xffcommand"),
            Entry(7, 6, EntryKind.NOOP),
            Entry(7, 7, EntryKind.CONFIG, ABC.encode()),
        ),
    ),
    AppendEntriesResponse(**HEAD, success=True, match_index=9),
    AppendEntriesResponse(**HEAD, success=False, reject_index=8, conflict_term=None,
                          conflict_index=3),
    AppendEntriesResponse(**HEAD, success=False, reject_index=8, conflict_term=0,
                          conflict_index=3),
    AppendEntriesResponse(**HEAD, success=False, reject_index=8, conflict_term=5,
                          conflict_index=6),
    Heartbeat(**HEAD, leader_commit=3, round=U64_MAX),
    HeartbeatResponse(**HEAD, round=17),
    InstallSnapshot(**HEAD, snapshot=Snapshot(40, 6, ABC, b"state" * 100)),
    InstallSnapshot(**HEAD, snapshot=Snapshot(1, 1, Membership.of([]), b"")),
    InstallSnapshotResponse(**HEAD, match_index=40),
    TimeoutNow(**HEAD),
]


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).__name__)
def test_every_message_type_round_trips(message: Message) -> None:
    data = encode_message(message)
    assert data[0] == WIRE_VERSION
    decoded = decode_message(data)
    assert type(decoded) is type(message)
    assert decoded == message


def test_every_message_type_is_covered() -> None:
    covered = {type(m) for m in EXAMPLES}
    assert len(covered) == 11


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).__name__)
def test_every_truncation_and_any_extra_byte_is_rejected(message: Message) -> None:
    data = encode_message(message)
    for end in range(len(data)):
        with pytest.raises(WireDecodeError):
            decode_message(data[:end])
    with pytest.raises(WireDecodeError, match="unexpected bytes"):
        decode_message(data + b"\x00")


def test_bad_headers_and_fields_are_wire_errors() -> None:
    good = encode_message(RequestVoteResponse(**HEAD, granted=True))
    with pytest.raises(WireDecodeError, match="version"):
        decode_message(bytes([WIRE_VERSION + 1]) + good[1:])
    with pytest.raises(WireDecodeError, match="message type"):
        decode_message(good[:1] + b"\xee" + good[2:])
    with pytest.raises(WireDecodeError, match="boolean"):
        decode_message(good[:-1] + b"\x02")
    bad_utf8 = bytes([WIRE_VERSION, 11]) + struct.pack("<H", 2) + b"\xc3\x28" + good[2:]
    with pytest.raises(WireDecodeError, match="utf-8"):
        decode_message(bad_utf8)


def test_semantically_broken_payloads_are_wire_errors() -> None:
    append = AppendEntries(**HEAD, prev_log_index=4, prev_log_term=3, leader_commit=0,
                           entries=(Entry(3, 5, EntryKind.NORMAL, b"x"),))
    data = bytearray(encode_message(append))
    kind_at = len(data) - 1 - 4 - 1  # kind u8 | data length u32 | b"x"
    data[kind_at] = 9
    with pytest.raises(WireDecodeError, match="entry kind"):
        decode_message(bytes(data))
    gap = AppendEntries(**HEAD, prev_log_index=4, prev_log_term=3, leader_commit=0,
                        entries=(Entry(3, 6, EntryKind.NORMAL, b"x"),))
    # Built by hand: the encoder does not check contiguity, the decoder does.
    with pytest.raises(WireDecodeError, match="belongs"):
        decode_message(encode_message(gap))
    # A node both voter and learner, and a node listed twice.
    voter_and_learner = encode_message(
        InstallSnapshot(**HEAD, snapshot=Snapshot(1, 1, Membership.of(["a"], ["b"]), b""))
    ).replace(b"\x01\x00b", b"\x01\x00a")
    with pytest.raises(WireDecodeError, match="membership"):
        decode_message(voter_and_learner)
    twice = encode_message(
        InstallSnapshot(**HEAD, snapshot=Snapshot(1, 1, Membership.of(["a", "b"]), b""))
    ).replace(b"\x01\x00b", b"\x01\x00a")
    with pytest.raises(WireDecodeError, match="out of order or listed twice"):
        decode_message(twice)


def test_values_that_do_not_fit_are_refused_on_encode() -> None:
    for term in (-1, 2**64):
        with pytest.raises(ValueError, match="cannot encode"):
            encode_message(Heartbeat(source="a", target="b", term=term, leader_commit=0))
    with pytest.raises(ValueError, match="cannot encode"):
        encode_message(Heartbeat(source="x" * 70_000, target="b", term=1, leader_commit=0))
    with pytest.raises(ValueError, match="cannot encode a Message"):
        encode_message(Message(**HEAD))


# ------------------------------------------------------------------ properties

ids = st.text(min_size=0, max_size=12)
u64 = st.integers(min_value=0, max_value=U64_MAX)
small = st.integers(min_value=0, max_value=1_000_000)
blobs = st.binary(max_size=64)
memberships = st.builds(
    lambda voters, learners: Membership(frozenset(voters), frozenset(learners) - voters),
    st.frozensets(ids, max_size=5),
    st.frozensets(ids, max_size=3),
)


@st.composite
def append_entries(draw: st.DrawFn) -> AppendEntries:
    prev_index = draw(small)
    kinds = draw(st.lists(st.sampled_from(EntryKind), max_size=5))
    entries = tuple(
        Entry(draw(u64), prev_index + 1 + i, kind, draw(blobs)) for i, kind in enumerate(kinds)
    )
    return AppendEntries(source=draw(ids), target=draw(ids), term=draw(u64),
                         prev_log_index=prev_index, prev_log_term=draw(u64),
                         entries=entries, leader_commit=draw(u64))


def head() -> dict[str, st.SearchStrategy[object]]:
    return {"source": ids, "target": ids, "term": u64}


messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(PreVote, **head(), last_log_index=u64, last_log_term=u64),
    st.builds(RequestVote, **head(), last_log_index=u64, last_log_term=u64,
              transfer=st.booleans()),
    st.builds(PreVoteResponse, **head(), granted=st.booleans()),
    st.builds(RequestVoteResponse, **head(), granted=st.booleans()),
    append_entries(),
    st.builds(AppendEntriesResponse, **head(), success=st.booleans(), match_index=u64,
              reject_index=u64, conflict_term=st.none() | u64, conflict_index=u64),
    st.builds(Heartbeat, **head(), leader_commit=u64, round=u64),
    st.builds(HeartbeatResponse, **head(), round=u64),
    st.builds(InstallSnapshot, **head(),
              snapshot=st.builds(Snapshot, u64, u64, memberships, blobs)),
    st.builds(InstallSnapshotResponse, **head(), match_index=u64),
    st.builds(TimeoutNow, **head()),
)


@given(messages)
@settings(max_examples=400, deadline=None)
def test_property_round_trip(message: Message) -> None:
    decoded = decode_message(encode_message(message))
    assert type(decoded) is type(message)
    assert decoded == message


@given(st.binary(max_size=200))
@settings(max_examples=600, deadline=None)
def test_property_random_bytes_decode_or_raise_wire_error_only(data: bytes) -> None:
    try:
        message = decode_message(data)
    except WireDecodeError:
        return
    assert encode_message(message) == data  # whatever decodes is canonical


@given(messages, st.data())
@settings(max_examples=400, deadline=None)
def test_property_corrupted_messages_decode_or_raise_wire_error_only(
    message: Message, data: st.DataObject
) -> None:
    encoded = bytearray(encode_message(message))
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        position = data.draw(st.integers(min_value=0, max_value=len(encoded) - 1))
        encoded[position] = data.draw(st.integers(min_value=0, max_value=255))
    cut = data.draw(st.integers(min_value=0, max_value=len(encoded)))
    try:
        decoded = decode_message(bytes(encoded[:cut]))
    except WireDecodeError:
        return
    assert encode_message(decoded) == bytes(encoded[:cut])
