"""The Ready hand-off: what must be persisted before which message, and advance()."""

import random

import pytest

from replication.raft import (
    EMPTY_MEMBERSHIP,
    Entry,
    EntryKind,
    HardState,
    Membership,
    RaftConfig,
    RaftNode,
    Role,
    SoftState,
)
from replication.raft.messages import AppendEntries, Heartbeat, RequestVote, RequestVoteResponse

ABC = Membership.of(["a", "b", "c"])
CONFIG = RaftConfig(prevote=False)


def founder(node_id: str = "a") -> RaftNode:
    node = RaftNode(node_id, ABC, CONFIG, random.Random(1))
    node.advance(node.ready())
    return node


def test_a_founder_first_persists_the_founding_entry_and_its_term() -> None:
    node = RaftNode("a", ABC, CONFIG, random.Random(1))
    ready = node.ready()
    founding = Entry(1, 1, EntryKind.CONFIG, ABC.encode())
    assert ready.hard_state == HardState(term=1, vote=None, commit=1)
    assert ready.entries == (founding,) and ready.committed_entries == (founding,)
    assert ready.must_sync and ready.messages == () and ready.snapshot is None
    node.advance(ready)
    assert not node.has_ready()


def test_a_joining_node_has_nothing_to_persist_until_it_hears_from_a_leader() -> None:
    node = RaftNode("d", EMPTY_MEMBERSHIP, CONFIG, random.Random(1))
    assert not node.has_ready()
    for _ in range(100):
        node.tick()
    assert not node.has_ready()  # not a voter anywhere: it never campaigns


def test_a_vote_travels_in_the_same_ready_as_the_state_that_records_it() -> None:
    node = founder("b")
    node.step(RequestVote(source="a", target="b", term=2, last_log_index=1, last_log_term=1))
    ready = node.ready()
    assert ready.hard_state == HardState(term=2, vote="a", commit=1)
    assert ready.must_sync  # the grant must not leave before the vote is durable
    [grant] = ready.messages
    assert isinstance(grant, RequestVoteResponse) and grant.granted


def test_a_commit_index_alone_needs_no_fsync() -> None:
    node = founder("b")
    entry = Entry(1, 2, EntryKind.NORMAL, b"x")
    node.step(AppendEntries(source="a", target="b", term=1, prev_log_index=1, prev_log_term=1,
                            entries=(entry,), leader_commit=1))
    appended = node.ready()
    assert appended.entries == (entry,) and appended.must_sync
    node.advance(appended)
    node.step(Heartbeat(source="a", target="b", term=1, leader_commit=2))
    ready = node.ready()
    assert ready.hard_state == HardState(term=1, vote=None, commit=2)
    assert not ready.must_sync  # a node that forgets it relearns it from the leader
    assert ready.committed_entries == (entry,)


def test_ready_must_be_advanced_before_the_next_one() -> None:
    node = founder()
    node.campaign()
    ready = node.ready()
    assert not node.has_ready()
    with pytest.raises(RuntimeError, match="advance"):
        node.ready()
    other = RaftNode("b", ABC, CONFIG, random.Random(1)).ready()
    with pytest.raises(RuntimeError, match="returned last"):
        node.advance(other)
    node.advance(ready)


def test_events_between_ready_and_advance_come_in_the_next_ready() -> None:
    node = RaftNode("a", Membership.of(["a"]), CONFIG, random.Random(1))
    node.advance(node.ready())
    node.campaign()  # alone: leader at once, with its no-op
    first = node.ready()
    assert first.soft_state == SoftState("a", Role.LEADER)
    assert [e.kind for e in first.entries] == [EntryKind.NOOP]
    index = node.propose(b"x")  # while the shell persists `first`
    node.advance(first)
    second = node.ready()
    assert [e.index for e in second.entries] == [index]
    assert [e.data for e in second.committed_entries] == [b"x"]
    assert second.soft_state is None
