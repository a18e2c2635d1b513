"""Single-server membership changes and leadership transfer, scenario by scenario."""

import pytest

from replication.raft import (
    ChangeKind,
    ConfigChange,
    ConfigChangeError,
    Membership,
    ProposalRefused,
    RaftConfig,
    Role,
)
from replication.raft.messages import AppendEntries
from tests.unit.replication.raft.cluster import CONFIG, Cluster

ELECTION = CONFIG.election_ticks
FORCED = RaftConfig(prevote=False, check_quorum=False)


def change(kind: ChangeKind, node: str) -> ConfigChange:
    return ConfigChange(kind, node)


def test_a_new_node_joins_as_a_learner_then_is_promoted_to_voter() -> None:
    cluster = Cluster(["a", "b", "c"], joiners=["d"])
    cluster.elect("a")
    cluster.propose("a", b"x")
    cluster.deliver()
    a = cluster.node("a")
    assert cluster.node("d").membership == Membership.of([])  # knows nothing yet
    a.propose_config_change(change(ChangeKind.ADD_LEARNER, "d"))
    assert a.membership == Membership.of(["a", "b", "c"], ["d"])  # in force once appended
    cluster.deliver()
    # d got the whole log, the founding membership included.
    assert cluster.log_terms("d") == cluster.log_terms("a")
    assert cluster.commands("d") == [b"x"]
    assert cluster.node("d").membership == Membership.of(["a", "b", "c"], ["d"])
    a.propose_config_change(change(ChangeKind.ADD_VOTER, "d"))
    cluster.deliver()
    four = Membership.of(["a", "b", "c", "d"])
    assert all(cluster.node(n).membership == four for n in "abcd")
    # Four voters need three: a and d alone cannot commit, a, b and d can.
    cluster.cut |= {("a", "b"), ("a", "c")}
    [index] = cluster.propose("a", b"y")
    cluster.deliver()
    assert a.commit_index == index - 1
    cluster.cut = {("a", "c")}
    cluster.run(2)
    assert a.commit_index == index


def test_only_one_change_may_be_uncommitted_at_a_time() -> None:
    cluster = Cluster(["a", "b", "c"], joiners=["d", "e"])
    cluster.elect("a")
    a = cluster.node("a")
    a.propose_config_change(change(ChangeKind.ADD_LEARNER, "d"))
    with pytest.raises(ProposalRefused, match="not committed yet"):
        a.propose_config_change(change(ChangeKind.ADD_LEARNER, "e"))
    cluster.deliver()
    a.propose_config_change(change(ChangeKind.ADD_LEARNER, "e"))
    assert a.membership == Membership.of(["a", "b", "c"], ["d", "e"])


def test_a_new_leader_proposes_no_change_before_committing_an_entry_of_its_term() -> None:
    cluster = Cluster(["a", "b", "c"], config=FORCED, joiners=["d"])
    a = cluster.node("a")
    a.campaign()
    cluster.deliver(keep=lambda m: not isinstance(m, AppendEntries))
    assert a.role is Role.LEADER
    with pytest.raises(ProposalRefused, match="not yet committed an entry of its term"):
        a.propose_config_change(change(ChangeKind.ADD_LEARNER, "d"))
    cluster.run(2)  # the no-op commits
    a.propose_config_change(change(ChangeKind.ADD_LEARNER, "d"))


def test_meaningless_changes_are_refused() -> None:
    cluster = Cluster(["a", "b"])
    cluster.elect("a")
    a = cluster.node("a")
    with pytest.raises(ConfigChangeError, match="already a voter"):
        a.propose_config_change(change(ChangeKind.ADD_VOTER, "b"))
    with pytest.raises(ConfigChangeError, match="not a member"):
        a.propose_config_change(change(ChangeKind.REMOVE, "zz"))


def test_a_leader_that_removes_itself_stops_counting_itself_then_hands_over() -> None:
    cluster = Cluster(["a", "b", "c"])
    cluster.elect("a")
    a = cluster.node("a")
    cluster.cut = {("a", "c"), ("c", "a")}
    [index] = [a.propose_config_change(change(ChangeKind.REMOVE, "a"))]
    cluster.deliver()
    # a and b hold the change, but in the new membership {b, c} a does not count.
    assert a.role is Role.LEADER and a.commit_index == index - 1
    cluster.heal()
    cluster.tick(["a"])
    trace = cluster.deliver()
    assert "a->b TimeoutNow t2" in trace
    assert "b->c RequestVote t3 last=(3,2)" in trace
    assert cluster.leaders() == ["b"]
    assert cluster.node("a").role is Role.FOLLOWER
    assert a.membership == Membership.of(["b", "c"])
    cluster.queue.clear()
    cluster.tick(["a"], times=5 * ELECTION)
    assert cluster.queue == []  # a is no voter any more: it never campaigns


def test_a_change_is_in_force_when_appended_and_undone_when_truncated() -> None:
    cluster = Cluster(["a", "b", "c", "d", "e"], config=FORCED)
    cluster.elect("a")
    cluster.node("a").propose_config_change(change(ChangeKind.REMOVE, "e"))
    cluster.deliver(keep=lambda m: (m.source, m.target) == ("a", "b"))
    b = cluster.node("b")
    assert b.membership == Membership.of(["a", "b", "c", "d"])  # uncommitted, yet in force
    cluster.crash("a")
    cluster.elect("c")  # with d and e: its log lacks the change
    cluster.deliver()
    assert b.raft_log.entry(3).term == 3  # the change was overwritten by c's no-op...
    assert b.membership == Membership.of(["a", "b", "c", "d", "e"])  # ...and undone


def test_a_removed_node_that_never_heard_of_it_cannot_disrupt() -> None:
    cluster = Cluster(["a", "b", "c"])
    cluster.elect("a")
    cluster.isolate("c")
    cluster.node("a").propose_config_change(change(ChangeKind.REMOVE, "c"))
    cluster.run(2)
    cluster.heal()
    assert cluster.node("c").membership == Membership.of(["a", "b", "c"])
    trace = cluster.run(10 * ELECTION)
    # c kept running pre-votes that a and b refused: nobody's term moved.
    assert "c->a PreVote t3 last=(2,2)" in trace
    assert "a->c PreVoteResponse t2 rejected" in trace
    assert "b->c PreVoteResponse t2 rejected" in trace
    assert not any("granted" in line for line in trace)
    assert cluster.leaders() == ["a"]
    assert {cluster.node(n).term for n in "abc"} == {2}


def test_leadership_transfer_catches_the_target_up_then_times_it_out() -> None:
    cluster = Cluster(["a", "b", "c"])
    cluster.elect("a")
    cluster.isolate("b")
    cluster.propose("a", b"x")
    cluster.deliver()
    cluster.heal()
    a = cluster.node("a")
    a.transfer_leadership("b")
    with pytest.raises(ProposalRefused, match="moving to b"):
        a.propose(b"refused")
    trace = cluster.deliver()
    assert trace[:5] == [
        "a->b AppendEntries t2 prev=(3,2) n=0 commit=3",
        "b->a AppendEntriesResponse t2 reject=3 hint=(3,None)",
        "a->b AppendEntries t2 prev=(2,2) n=1 commit=3",
        "b->a AppendEntriesResponse t2 ok match=3",
        "a->b TimeoutNow t2",
    ]
    # c heard from a just now, yet votes: the request says it is a handover.
    assert "c->b RequestVoteResponse t3 granted" in trace
    assert cluster.leaders() == ["b"]
    assert cluster.commands("b") == [b"x"]


def test_a_transfer_that_does_not_happen_is_abandoned_after_an_election_timeout() -> None:
    cluster = Cluster(["a", "b", "c"])
    cluster.elect("a")
    cluster.isolate("b")
    a = cluster.node("a")
    a.transfer_leadership("b")
    cluster.run(ELECTION)
    assert a.role is Role.LEADER
    cluster.propose("a", b"x")
    cluster.deliver()
    assert cluster.commands("c") == [b"x"]
