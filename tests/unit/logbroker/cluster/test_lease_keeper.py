"""`LeaseKeeper`: the lease renewed by the authority, lapsed at delivery, restored by proof.

Every test drives the pure core with explicit `now_ms` (no sleeps, no loop).
"""

from __future__ import annotations

from logbroker.cluster.lease_keeper import LeaseKeeper, LeaseRaft

VOTERS = frozenset({"a", "b", "c"})
FOLLOWER = LeaseRaft(leader="b", leading=False, term=3, voters=VOTERS)
LEADER = LeaseRaft(leader="a", leading=True, term=3, voters=VOTERS)


def keeper(now_ms: int = 0) -> LeaseKeeper:
    return LeaseKeeper("a", lease_ms=1000, now_ms=now_ms, restore_margin_ms=200, retry_ms=50)


def test_a_follower_is_renewed_by_the_raft_leader_only() -> None:
    lease = keeper()
    lease.heard("c", 3, FOLLOWER, 900)  # another follower: no authority
    assert lease.check(FOLLOWER, 900).valid
    assert not lease.check(FOLLOWER, 1001).valid
    lease = keeper()
    lease.heard("b", 3, FOLLOWER, 900)
    assert lease.check(FOLLOWER, 1800).valid


def test_a_lapse_is_seen_at_delivery_and_said_once() -> None:
    lease = keeper()
    first = lease.check(FOLLOWER, 9000)  # a SIGSTOP: nothing ran in between
    assert not first.valid and first.lapsed_now and first.silent_ms == 9000
    again = lease.check(FOLLOWER, 9001)
    assert not again.valid and not again.lapsed_now


def lapsed_follower(at_ms: int) -> LeaseKeeper:
    """A follower whose lease lapsed at `at_ms`, with its read index asked 1 ms later."""
    lease = keeper()
    verdict = lease.check(FOLLOWER, at_ms)
    # A proof must start strictly after the lapse (`LeaderLease.restore_proven_by`).
    assert verdict.ask is None and verdict.check_again_ms == at_ms + 1
    return lease


def test_a_lapsed_follower_is_restored_by_a_read_index_asked_after_the_lapse() -> None:
    lease = lapsed_follower(5000)
    verdict = lease.check(FOLLOWER, 5001)
    ask = verdict.ask
    assert ask is not None and ask.leader == "b" and ask.started_ms == 5001
    assert verdict.check_again_ms is None  # the answer brings the next check
    lease.heard("b", 3, FOLLOWER, 5001)  # frames buffered during the pause renew nothing
    assert lease.check(FOLLOWER, 5002).ask is None  # one question at a time
    assert lease.proved(ask.request, "b", applied=True, now_ms=5100)
    after = lease.check(FOLLOWER, 5100)
    assert after.valid and after.ask is None


def test_a_failed_proof_is_asked_again_after_the_retry() -> None:
    lease = lapsed_follower(4999)
    ask = lease.check(FOLLOWER, 5000).ask
    assert ask is not None
    assert not lease.proved(ask.request, "b", applied=False, now_ms=5010)
    verdict = lease.check(FOLLOWER, 5020)
    assert verdict.ask is None and verdict.check_again_ms == 5060  # 50 ms after the failure
    assert lease.check(FOLLOWER, 5059).ask is None
    retry = lease.check(FOLLOWER, 5060).ask
    assert retry is not None and retry.request > ask.request and retry.started_ms == 5060


def test_a_proof_from_a_leader_since_replaced_restores_nothing() -> None:
    lease = lapsed_follower(4999)
    ask = lease.check(FOLLOWER, 5000).ask
    assert ask is not None
    assert not lease.proved(ask.request, "c", applied=True, now_ms=5100)
    new_leader = LeaseRaft(leader="c", leading=False, term=4, voters=VOTERS)
    retry = lease.check(new_leader, 5100).ask  # at once, of the new leader
    assert retry is not None and retry.leader == "c"
    assert not lease.proved(ask.request, "c", applied=True, now_ms=5150)  # stale answer
    assert lease.proved(retry.request, "c", applied=True, now_ms=5200)
    assert lease.check(new_leader, 5200).valid


def test_no_leader_known_means_no_question_but_a_check_later() -> None:
    lease = keeper()
    unknown = LeaseRaft(leader=None, leading=False, term=4, voters=VOTERS)
    verdict = lease.check(unknown, 5000)
    assert verdict.ask is None and verdict.check_again_ms == 5050


def test_the_raft_leader_is_renewed_by_a_quorum_in_its_own_term() -> None:
    lease = keeper()
    lease.heard("b", 2, LEADER, 900)  # an older term proves nothing
    assert not lease.check(LEADER, 1001).valid
    lease = keeper()
    lease.heard("b", 3, LEADER, 900)  # b and a itself: a majority of three
    assert lease.check(LEADER, 1800).valid
    lease.term_changed()  # what b said in the old term no longer counts
    assert not lease.check(LEADER, 1950).valid


def test_the_raft_leader_never_asks_a_read_index_and_waits_for_a_fresh_quorum() -> None:
    lease = keeper()
    verdict = lease.check(LEADER, 3000)
    assert not verdict.valid and verdict.ask is None and verdict.check_again_ms == 3050
    assert not lease.heard("b", 3, LEADER, 3001)  # buffered during the pause: too early
    assert not lease.check(LEADER, 3100).valid
    assert lease.heard("c", 3, LEADER, 3200)  # margin past the lapse: restored on arrival
    assert lease.check(LEADER, 3200).valid


def test_a_check_by_the_leader_restores_from_the_quorum_heard() -> None:
    lease = keeper()
    assert not lease.check(LEADER, 3000).valid
    lease.term_changed()
    lease.heard("b", 3, LEADER, 3300)
    verdict = lease.check(LEADER, 3300)
    assert verdict.valid  # restored from the quorum while reading
    assert not verdict.restored  # (heard already restored it: reported once)
