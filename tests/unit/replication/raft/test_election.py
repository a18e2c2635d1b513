"""Elections: pre-vote, votes, randomized timeouts, check-quorum, the leader lease."""

import random

import pytest

from replication.raft import Membership, RaftConfig, RaftNode, Role
from replication.raft.messages import PreVote, RequestVote
from tests.unit.replication.raft.cluster import CONFIG, Cluster

ELECTION = CONFIG.election_ticks


def test_first_election_runs_prevote_then_vote_then_the_noop() -> None:
    cluster = Cluster(["a", "b", "c"])
    assert cluster.elect("a") == [
        "a->b PreVote t2 last=(1,1)",
        "a->c PreVote t2 last=(1,1)",
        "b->a PreVoteResponse t2 granted",
        "c->a PreVoteResponse t2 granted",
        "a->b RequestVote t2 last=(1,1)",
        "a->c RequestVote t2 last=(1,1)",
        "b->a RequestVoteResponse t2 granted",
        "c->a RequestVoteResponse t2 granted",
        # The new leader's no-op at index 2 commits everything before it.
        "a->b AppendEntries t2 prev=(1,1) n=1 commit=1",
        "a->c AppendEntries t2 prev=(1,1) n=1 commit=1",
        "b->a AppendEntriesResponse t2 ok match=2",
        "c->a AppendEntriesResponse t2 ok match=2",
        "a->b AppendEntries t2 prev=(2,2) n=0 commit=2",
        "a->c AppendEntries t2 prev=(2,2) n=0 commit=2",
        "b->a AppendEntriesResponse t2 ok match=2",
        "c->a AppendEntriesResponse t2 ok match=2",
    ]
    assert {n: cluster.node(n).leader_id for n in "abc"} == {"a": "a", "b": "a", "c": "a"}
    assert cluster.disks["b"].hard_state.vote == "a"
    assert cluster.disks["b"].hard_state.term == 2


def test_the_election_timeout_is_drawn_from_the_injected_rng() -> None:
    def ticks_until_campaign(seed: int) -> int:
        node = RaftNode("a", Membership.of(["a", "b", "c"]), CONFIG, random.Random(seed))
        for tick in range(1, 100):
            node.tick()
            if node.role is Role.PRE_CANDIDATE:
                return tick
        raise AssertionError("never campaigned")

    timeouts = [ticks_until_campaign(seed) for seed in range(40)]
    assert all(ELECTION <= t < 2 * ELECTION for t in timeouts)
    assert len(set(timeouts)) > 3
    assert timeouts == [ticks_until_campaign(seed) for seed in range(40)]


def test_followers_elect_a_new_leader_after_the_leader_stops() -> None:
    cluster = Cluster(["a", "b", "c"])
    cluster.elect("a")
    cluster.propose("a", b"x")
    cluster.deliver()
    cluster.crash("a")
    cluster.run(2 * ELECTION + 5)
    [leader] = cluster.leaders()
    assert leader in ("b", "c")
    assert cluster.node(leader).term == 3
    cluster.propose(leader, b"y")
    cluster.deliver()
    assert cluster.commands("b") == cluster.commands("c") == [b"x", b"y"]


def test_a_candidate_with_a_shorter_log_cannot_win() -> None:
    cluster = Cluster(["a", "b", "c"])
    cluster.elect("a")
    cluster.isolate("c")
    cluster.propose("a", b"x")
    cluster.deliver()
    cluster.crash("a")
    cluster.heal()
    # c's log lacks x: b refuses it even the pre-vote, then b wins.
    cluster.tick(["b", "c"], times=ELECTION)  # both past their lease
    cluster.node("c").campaign()
    trace = cluster.deliver()
    assert "b->c PreVoteResponse t2 rejected" in trace
    # Without a's answer c can neither win nor know it lost; its term never moved.
    assert cluster.node("c").role is Role.PRE_CANDIDATE
    assert cluster.node("c").term == 2
    cluster.run(3 * ELECTION)
    assert cluster.leaders() == ["b"]
    assert cluster.commands("c") == [b"x"]


def test_a_vote_is_durable_before_it_is_sent_and_survives_a_restart() -> None:
    cluster = Cluster(["a", "b", "c"], config=RaftConfig(prevote=False, check_quorum=False))
    cluster.node("a").campaign()
    # Only b hears a; b's grant leaves in the same Ready that persists its vote.
    cluster.deliver(keep=lambda m: m.target == "b" or m.source == "b")
    assert (cluster.disks["b"].hard_state.term, cluster.disks["b"].hard_state.vote) == (2, "a")
    cluster.crash("b")
    cluster.restart("b")
    # c, still in term 1, campaigns for term 2 too: the restarted b must not vote twice.
    cluster.node("c").campaign()
    trace = cluster.deliver(keep=lambda m: "a" not in (m.source, m.target))
    assert trace == [
        "c->b RequestVote t2 last=(1,1)",
        "b->c RequestVoteResponse t2 rejected",
    ]
    assert cluster.node("b").vote == "a"


def test_prevote_keeps_a_returning_node_from_disrupting_a_healthy_leader() -> None:
    cluster = Cluster(["a", "b", "c"])
    cluster.elect("a")
    cluster.isolate("c")
    cluster.run(5 * ELECTION)
    # Alone, c kept failing pre-votes: it never bumped its term.
    assert cluster.node("c").term == 2
    cluster.heal()
    cluster.node("c").campaign()
    trace = cluster.deliver()
    assert "b->c PreVoteResponse t2 rejected" in trace  # b heard from a recently
    assert cluster.node("a").role is Role.LEADER
    assert cluster.node("a").term == 2
    cluster.run(3)
    assert cluster.node("c").leader_id == "a"


def test_without_prevote_a_returning_node_deposes_the_leader() -> None:
    """The disruption pre-vote prevents (check-quorum off, so no lease either)."""
    cluster = Cluster(["a", "b", "c"], config=RaftConfig(prevote=False, check_quorum=False))
    cluster.elect("a")
    cluster.isolate("c")
    cluster.run(5 * ELECTION)
    assert cluster.node("c").term > 3
    cluster.heal()
    cluster.run(1)
    assert cluster.node("a").role is not Role.LEADER
    assert cluster.node("a").term == cluster.node("c").term


def test_check_quorum_lease_ignores_vote_requests_while_a_leader_is_alive() -> None:
    cluster = Cluster(["a", "b", "c"], config=RaftConfig(prevote=False, check_quorum=True))
    cluster.elect("a")
    b = cluster.node("b")
    b.step(RequestVote(source="c", target="b", term=9, last_log_index=99, last_log_term=9))
    assert b.term == 2 and b.vote == "a"
    assert not [m for m in b.ready().messages if m.target == "c"]


def test_an_isolated_leader_steps_down_after_an_election_timeout() -> None:
    cluster = Cluster(["a", "b", "c"])
    cluster.elect("a")
    cluster.isolate("a")
    # The first check still counts the answers from the election.
    cluster.tick(["a"], times=ELECTION)
    assert cluster.node("a").role is Role.LEADER
    cluster.tick(["a"], times=ELECTION - 1)
    assert cluster.node("a").role is Role.LEADER
    cluster.tick(["a"])
    assert cluster.node("a").role is Role.FOLLOWER
    assert cluster.node("a").leader_id is None


def test_without_check_quorum_an_isolated_leader_keeps_leading() -> None:
    cluster = Cluster(["a", "b", "c"], config=RaftConfig(check_quorum=False))
    cluster.elect("a")
    cluster.isolate("a")
    cluster.tick(["a"], times=5 * ELECTION)
    assert cluster.node("a").role is Role.LEADER


def test_a_deposed_leader_steps_down_on_the_first_reply_in_a_newer_term() -> None:
    cluster = Cluster(["a", "b", "c"], config=RaftConfig(check_quorum=False))
    cluster.elect("a")
    cluster.isolate("a")
    cluster.run(3 * ELECTION)
    [new_leader] = [n for n in cluster.leaders() if n != "a"]
    assert cluster.node("a").role is Role.LEADER  # it cannot know yet
    cluster.heal()
    cluster.tick(["a"])
    trace = cluster.deliver()
    assert trace[:4] == [
        "a->b Heartbeat t2 commit=2",
        "a->c Heartbeat t2 commit=2",
        "b->a HeartbeatResponse t3",
        "c->a HeartbeatResponse t3",
    ]
    assert cluster.leaders() == [new_leader]
    assert cluster.node("a").term == 3


def test_a_split_vote_is_resolved_by_randomized_timeouts() -> None:
    cluster = Cluster(["a", "b", "c", "d"], config=RaftConfig(prevote=False), seed=3)
    cluster.node("a").campaign()
    cluster.node("b").campaign()
    cluster.deliver(keep=lambda m: not isinstance(m, RequestVote)
                    or (m.source, m.target) in (("a", "c"), ("b", "d")))
    # a and b split the four votes of term 2: nobody wins.
    assert cluster.leaders() == []
    cluster.run(4 * ELECTION)
    [leader] = cluster.leaders()
    assert cluster.node(leader).term >= 3


def test_learners_never_campaign() -> None:
    cluster = Cluster(["a", "b"], learners=["l"])
    cluster.tick(["l"], times=10 * ELECTION)
    assert cluster.node("l").role is Role.FOLLOWER
    assert cluster.queue == []


@pytest.mark.parametrize("prevote", [True, False])
def test_a_single_voter_elects_itself_and_commits_alone(prevote: bool) -> None:
    cluster = Cluster(["a"], config=RaftConfig(prevote=prevote))
    cluster.tick(times=2 * ELECTION)
    assert cluster.leaders() == ["a"]
    cluster.propose("a", b"x")
    assert cluster.commands("a") == [b"x"]
    assert not any(isinstance(m, PreVote) for m in cluster.queue)
