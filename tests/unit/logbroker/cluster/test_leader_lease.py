"""`LeaderLease`: valid while renewed within the lease; a lapse holds until proven over."""

from __future__ import annotations

from logbroker.cluster.leader_lease import LeaderLease, quorum_heard_ms


def test_valid_while_renewed_and_lapsed_when_read_late() -> None:
    lease = LeaderLease(1000, now_ms=0)
    assert lease.valid(900)
    lease.renew(900)
    assert lease.valid(1800)
    # A SIGSTOP: nothing ran between 1800 and 9000; the first read sees it.
    assert not lease.valid(9000)
    assert lease.lapsed_at == 9000


def test_a_lapsed_lease_is_not_renewed_by_what_arrives_next() -> None:
    lease = LeaderLease(1000, now_ms=0)
    assert not lease.valid(5000)
    lease.renew(5001)  # a frame that waited in the socket during the pause
    assert not lease.valid(5002)
    assert not lease.restore_proven_by(4000)  # a read index asked before the lapse
    assert lease.restore_proven_by(5010)
    lease.restore(5100)
    assert lease.valid(5100) and not lease.lapsed


def test_a_quorum_proves_only_well_after_the_lapse() -> None:
    lease = LeaderLease(1000, now_ms=0, restore_margin_ms=200)
    assert not lease.valid(3000)
    assert not lease.quorum_proves(3001)
    assert lease.quorum_proves(3200)


def test_renewal_never_goes_back() -> None:
    lease = LeaderLease(1000, now_ms=500)
    lease.renew(100)
    assert lease.renewed_ms == 500


def test_quorum_heard() -> None:
    voters = ["a", "b", "c"]
    assert quorum_heard_ms(voters, "a", {}, 1000) is None
    assert quorum_heard_ms(voters, "a", {"b": 700}, 1000) == 700
    assert quorum_heard_ms(voters, "a", {"b": 700, "c": 900}, 1000) == 900
    assert quorum_heard_ms(["a"], "a", {}, 1000) == 1000
    five = ["a", "b", "c", "d", "e"]
    assert quorum_heard_ms(five, "a", {"b": 10, "c": 20, "d": 30}, 50) == 20
