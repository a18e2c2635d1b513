"""Compaction and InstallSnapshot."""

import pytest

from replication.raft import Membership, Role
from replication.raft.messages import InstallSnapshot, InstallSnapshotResponse, Snapshot
from tests.unit.replication.raft.cluster import CONFIG, Cluster

ELECTION = CONFIG.election_ticks


def compacted_cluster() -> Cluster:
    """a leads; c was down while ten commands committed; a compacted them away."""
    cluster = Cluster(["a", "b", "c"])
    cluster.elect("a")
    cluster.crash("c")
    cluster.propose("a", *[b"%d" % i for i in range(10)])  # indexes 3..12
    cluster.deliver()
    a = cluster.node("a")
    snapshot = a.compact(a.raft_log.applied_index, b"state@12")
    cluster.disks["a"].compact(snapshot)
    assert (a.raft_log.snapshot_index, a.raft_log.first_index) == (12, 13)
    assert snapshot == Snapshot(12, 2, Membership.of(["a", "b", "c"]), b"state@12")
    return cluster


def test_a_node_behind_the_compaction_point_is_sent_the_snapshot() -> None:
    cluster = compacted_cluster()
    cluster.restart("c")
    cluster.tick(["a"])
    trace = [line for line in cluster.deliver() if "c" in line.split()[0]]
    assert trace == [
        "a->c Heartbeat t2 commit=2",
        "c->a HeartbeatResponse t2",
        # The heartbeat answer shows the earlier appends were lost; entry 3,
        # where c must resume, is compacted: only the snapshot will do.
        "a->c InstallSnapshot t2 index=12",
        "c->a InstallSnapshotResponse t2 match=12",
    ]
    c = cluster.node("c")
    assert cluster.disks["c"].snapshot is not None
    assert cluster.disks["c"].snapshot.data == b"state@12"
    assert (c.raft_log.snapshot_index, c.raft_log.last_index, c.commit_index) == (12, 12, 12)
    assert c.membership == Membership.of(["a", "b", "c"])
    cluster.propose("a", b"after")
    cluster.deliver()
    assert [e.index for e in cluster.applied["c"]][-2:] == [12, 13]
    assert cluster.commands("c") == [b"after"]  # the rest is inside the snapshot


def test_a_lost_snapshot_is_sent_again_after_an_election_timeout() -> None:
    cluster = compacted_cluster()
    cluster.restart("c")
    cluster.tick(["a"])
    cluster.deliver(keep=lambda m: not isinstance(m, InstallSnapshot))
    assert cluster.node("c").raft_log.last_index == 2
    cluster.run(ELECTION)
    assert cluster.node("c").raft_log.snapshot_index == 12
    snapshots_sent = [line for line in cluster.dropped if "InstallSnapshot" in line]
    assert len(snapshots_sent) == 1


def test_a_snapshot_the_log_already_covers_just_moves_the_commit_index() -> None:
    cluster = Cluster(["a", "b", "c"])
    cluster.elect("a")
    cluster.propose("a", b"x", b"y")
    cluster.flush()
    cluster.deliver(keep=lambda m: m.target != "a")  # followers never ack: commit stays 2
    b = cluster.node("b")
    assert (b.raft_log.last_index, b.commit_index) == (4, 2)
    snapshot = Snapshot(3, 2, Membership.of(["a", "b", "c"]), b"state@3")
    b.step(InstallSnapshot(source="a", target="b", term=2, snapshot=snapshot))
    ready = b.ready()
    assert ready.snapshot is None  # nothing to restore: b applies its own entries
    assert [e.index for e in ready.committed_entries] == [3]
    assert (b.raft_log.snapshot_index, b.raft_log.last_index, b.commit_index) == (0, 4, 3)


def test_a_stale_snapshot_is_answered_with_the_commit_index() -> None:
    cluster = Cluster(["a", "b", "c"])
    cluster.elect("a")
    cluster.propose("a", b"x")
    cluster.deliver()
    b = cluster.node("b")
    snapshot = Snapshot(2, 2, Membership.of(["a", "b", "c"]), b"old")
    b.step(InstallSnapshot(source="a", target="b", term=2, snapshot=snapshot))
    ready = b.ready()
    assert ready.snapshot is None
    [response] = ready.messages
    assert isinstance(response, InstallSnapshotResponse)
    assert response.match_index == 3


def test_compaction_only_covers_applied_entries() -> None:
    cluster = Cluster(["a", "b", "c"])
    cluster.elect("a")
    cluster.propose("a", b"x")
    a = cluster.node("a")
    applied = a.raft_log.applied_index
    with pytest.raises(ValueError, match="applied to"):
        a.compact(applied + 1, b"")
    a.compact(applied, b"s")
    with pytest.raises(ValueError, match="compacted to"):
        a.compact(applied, b"s")


def test_a_node_restarts_from_its_snapshot_and_the_log_after_it() -> None:
    cluster = compacted_cluster()
    cluster.propose("a", b"after")
    cluster.deliver()
    cluster.crash("a")
    cluster.restart("a")
    a = cluster.node("a")
    assert (a.raft_log.snapshot_index, a.raft_log.last_index) == (12, 13)
    assert a.snapshot is not None and a.snapshot.data == b"state@12"
    assert a.membership == Membership.of(["a", "b", "c"])
    cluster.restart("c")
    cluster.run(3 * ELECTION)
    [leader] = cluster.leaders()
    cluster.propose(leader, b"later")
    cluster.deliver()
    for node in "abc":
        assert cluster.node(node).raft_log.last_index == cluster.node(leader).raft_log.last_index
        assert cluster.commands(node)[-1] == b"later"
    assert cluster.node(leader).role is Role.LEADER
