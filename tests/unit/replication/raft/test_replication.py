"""Log replication: the consistency check, fast back-off, commitment, stale leaders, learners."""

from replication.raft import NotLeader, RaftConfig, Role
from replication.raft.messages import AppendEntries, Message
from tests.unit.replication.raft.cluster import CONFIG, Cluster

ELECTION = CONFIG.election_ticks
# Elections forced with campaign() need no pre-vote round and no lease to expire.
FORCED = RaftConfig(prevote=False, check_quorum=False)


def test_a_proposal_commits_and_every_node_applies_it_in_order() -> None:
    cluster = Cluster(["a", "b", "c"])
    cluster.elect("a")
    assert cluster.propose("a", b"x", b"y") == [3, 4]
    cluster.deliver()
    for node in "abc":
        assert cluster.commands(node) == [b"x", b"y"]
        assert [e.index for e in cluster.applied[node]] == [1, 2, 3, 4]
    try:
        cluster.node("b").propose(b"z")
    except NotLeader as refused:
        assert refused.leader_hint == "a"
    else:
        raise AssertionError("a follower accepted a proposal")


def test_a_partitioned_old_leader_steps_down_and_its_uncommitted_entries_are_overwritten() -> None:
    cluster = Cluster(["a", "b", "c"], config=RaftConfig(check_quorum=False))
    cluster.elect("a")
    cluster.propose("a", b"x")
    cluster.deliver()
    cluster.isolate("a")
    cluster.propose("a", b"lost-1", b"lost-2")  # only a ever holds these
    cluster.run(3 * ELECTION)
    [new_leader] = [n for n in cluster.leaders() if n != "a"]
    cluster.propose(new_leader, b"w")
    cluster.deliver()
    assert cluster.node("a").role is Role.LEADER  # stale, and cannot know
    assert cluster.node("a").raft_log.last_index == 5
    cluster.heal()
    cluster.tick(["a"])
    trace = cluster.deliver()
    assert trace[:2] == ["a->b Heartbeat t2 commit=3", "a->c Heartbeat t2 commit=3"]
    assert cluster.node("a").role is Role.FOLLOWER
    cluster.run(2)
    assert cluster.node("a").leader_id == new_leader
    for node in "abc":
        assert cluster.commands(node) == [b"x", b"w"]
        assert cluster.log_terms(node) == cluster.log_terms(new_leader)


def test_a_conflicting_follower_is_repaired_with_one_round_trip_per_term() -> None:
    cluster = Cluster(["a", "b", "c", "d", "e"], config=FORCED)
    cluster.elect("a")
    cluster.propose("a", b"x")
    cluster.deliver()
    cluster.isolate("a")
    cluster.propose("a", *[b"a%d" % i for i in range(5)])  # 4..8 in term 2, only on a
    cluster.elect("b")
    cluster.propose("b", *[b"b%d" % i for i in range(5)])  # 4..9 in term 3
    cluster.deliver()
    cluster.crash("b")
    cluster.elect("c")  # no-op at 10 in term 4
    assert cluster.log_terms("a")[3:] == [(i, 2) for i in range(4, 9)]
    cluster.heal()
    cluster.tick(["c"])
    trace = [line for line in cluster.deliver() if "a" in line.split()[0]]
    assert trace == [
        "c->a Heartbeat t4 commit=0",
        "a->c HeartbeatResponse t4",
        "c->a AppendEntries t4 prev=(9,3) n=1 commit=10",
        # Too short: a tells its end instead of letting c walk back one by one.
        "a->c AppendEntriesResponse t4 reject=9 hint=(9,None)",
        "c->a AppendEntries t4 prev=(8,3) n=2 commit=10",
        # Wrong term at 8: a's term-2 run starts above its commit index, at 4; c also
        # holds term 2 and so jumps to its own last term-2 entry, 3.
        "a->c AppendEntriesResponse t4 reject=8 hint=(4,2)",
        "c->a AppendEntries t4 prev=(3,2) n=7 commit=10",
        "a->c AppendEntriesResponse t4 ok match=10",
    ]
    assert cluster.log_terms("a") == cluster.log_terms("c")
    assert cluster.commands("a") == [b"x", b"b0", b"b1", b"b2", b"b3", b"b4"]


def test_entries_of_an_older_term_are_not_committed_by_counting_replicas() -> None:
    """Raft's figure 8: a majority holding an old-term entry does not make it committed."""
    cluster = Cluster(["a", "b", "c"], config=RaftConfig(prevote=False, check_quorum=False,
                                                         max_entries_per_append=1))
    cluster.elect("a")
    cluster.propose("a", b"old")  # index 3, term 2
    cluster.deliver(keep=lambda m: (m.source, m.target) == ("a", "b"))
    cluster.crash("a")
    assert cluster.log_terms("b")[-1] == (3, 2) and cluster.node("b").commit_index == 2
    b = cluster.node("b")
    b.campaign()  # wins with c's vote and appends its no-op at 4, term 3
    probes_at_3: list[AppendEntries] = []

    def lose_the_append_carrying_4(m: Message) -> bool:
        # The first append at prev 3 is c's rejected probe; the second carries 4.
        if isinstance(m, AppendEntries) and m.prev_log_index == 3:
            probes_at_3.append(m)
            return len(probes_at_3) == 1
        return True

    assert cluster.deliver(keep=lose_the_append_carrying_4)[2:] == [
        "b->c AppendEntries t3 prev=(3,2) n=1 commit=2",
        "c->b AppendEntriesResponse t3 reject=3 hint=(3,None)",
        "b->c AppendEntries t3 prev=(2,2) n=1 commit=2",
        "c->b AppendEntriesResponse t3 ok match=3",
    ]
    assert b.match_index("c") == 3
    # b and c (a majority) both hold (3, term 2), yet it is not committed:
    assert b.commit_index == 2
    assert cluster.commands("b") == []
    # The lost append is resent once c answers a later heartbeat; committing
    # the no-op commits the old entry with it.
    cluster.run(2)
    assert b.commit_index == 4
    assert cluster.commands("b") == cluster.commands("c") == [b"old"]


def test_learners_receive_the_log_but_do_not_count_for_commitment() -> None:
    cluster = Cluster(["a", "b"], learners=["l"])
    cluster.elect("a")
    cluster.isolate("b")
    cluster.propose("a", b"x")
    cluster.deliver()
    assert cluster.node("a").match_index("l") == 3
    assert cluster.node("a").commit_index == 2  # l holds x, but l is not a voter
    cluster.heal()
    cluster.run(3)
    assert cluster.commands("a") == cluster.commands("b") == cluster.commands("l") == [b"x"]


def test_a_node_back_from_a_crash_is_caught_up_from_its_last_index() -> None:
    cluster = Cluster(["a", "b", "c"])
    cluster.elect("a")
    cluster.crash("c")
    cluster.propose("a", *[b"%d" % i for i in range(20)])
    cluster.deliver()
    cluster.restart("c")
    cluster.run(3)
    assert cluster.commands("c") == [b"%d" % i for i in range(20)]
    rejections = [line for line in cluster.dropped if "reject" in line]
    assert rejections == []


def test_entries_stream_within_the_inflight_window_and_batch_while_it_is_full() -> None:
    cluster = Cluster(["a", "b"], config=RaftConfig(max_entries_per_append=2, max_inflight=3))
    cluster.elect("a")
    cluster.propose("a", *[b"%d" % i for i in range(10)])  # indexes 3..12
    assert cluster.deliver() == [
        # One message per proposal until three are unacknowledged...
        "a->b AppendEntries t2 prev=(2,2) n=1 commit=2",
        "a->b AppendEntries t2 prev=(3,2) n=1 commit=2",
        "a->b AppendEntries t2 prev=(4,2) n=1 commit=2",
        "b->a AppendEntriesResponse t2 ok match=3",
        "b->a AppendEntriesResponse t2 ok match=4",
        "b->a AppendEntriesResponse t2 ok match=5",
        # ...then each freed slot takes up to max_entries_per_append of the backlog.
        "a->b AppendEntries t2 prev=(5,2) n=2 commit=3",
        "a->b AppendEntries t2 prev=(7,2) n=2 commit=4",
        "a->b AppendEntries t2 prev=(9,2) n=2 commit=5",
        "b->a AppendEntriesResponse t2 ok match=7",
        "b->a AppendEntriesResponse t2 ok match=9",
        "b->a AppendEntriesResponse t2 ok match=11",
        "a->b AppendEntries t2 prev=(11,2) n=1 commit=7",
        "b->a AppendEntriesResponse t2 ok match=12",
        # Idle again, b hears the final commit index at once.
        "a->b AppendEntries t2 prev=(12,2) n=0 commit=12",
        "b->a AppendEntriesResponse t2 ok match=12",
    ]
    assert cluster.commands("b") == [b"%d" % i for i in range(10)]


def test_a_lost_append_is_resent_once_a_later_heartbeat_is_answered() -> None:
    cluster = Cluster(["a", "b"])
    cluster.elect("a")
    cluster.propose("a", b"x")
    assert cluster.deliver(keep=lambda m: not isinstance(m, AppendEntries)) == []
    cluster.tick(["a"])
    assert cluster.deliver() == [
        "a->b Heartbeat t2 commit=2",
        "b->a HeartbeatResponse t2",
        # The heartbeat went out after the append and came back first: resend.
        "a->b AppendEntries t2 prev=(2,2) n=1 commit=2",
        "b->a AppendEntriesResponse t2 ok match=3",
        "a->b AppendEntries t2 prev=(3,2) n=0 commit=3",
        "b->a AppendEntriesResponse t2 ok match=3",
    ]
    assert cluster.commands("b") == [b"x"]
