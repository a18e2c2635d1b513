"""Both sides of queue replication driven together, fetch by fetch, on MemoryFileSystems."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replication.queue.failover import Promotion
from replication.queue.replication_leader import (
    Refuse,
    ReplicationLimits,
    Reset,
    Stream,
    Truncate,
)

from .cluster import LEADER_LOG, Cluster, PowerCutAt, batch_bytes, state_shape, values


def test_a_follower_copies_the_leaders_log_byte_for_byte() -> None:
    cluster = Cluster.start()
    for round_ in range(30):
        cluster.publish(1 + round_ % 7, size=10 + round_)
        if round_ % 4 == 0:
            cluster.leader_sync()
    cluster.leader_sync()
    for name in cluster.followers():
        verdicts = cluster.catch_up(name, max_bytes=300)
        assert len(verdicts) > 3  # many small fetches
        assert all(isinstance(v, Stream) for v in verdicts)
    cluster.assert_converged()
    follower = cluster.follower("b")
    assert values(follower.log) == values(cluster.leader.log)
    assert follower.history.entries == cluster.leader.history.entries
    assert cluster.core.high_watermark == cluster.leader.log.next_offset


def test_the_high_watermark_follows_the_slowest_in_sync_copy() -> None:
    cluster = Cluster.start()
    cluster.publish(10)
    cluster.leader_sync()
    cluster.catch_up("b")
    assert cluster.core.high_watermark == 0  # c has nothing
    cluster.fetch("c", max_bytes=1)  # one batch, not yet reported
    assert cluster.core.high_watermark == 0
    cluster.fetch("c")
    assert cluster.core.high_watermark == 10
    # A follower reports only what it synced: the unsynced tail is not counted.
    cluster.publish(5)
    cluster.fetch("b")
    cluster.fetch("c")
    assert cluster.core.high_watermark == 10  # the leader itself has not synced them
    cluster.leader_sync()
    cluster.fetch("b")
    cluster.fetch("c")
    assert cluster.core.high_watermark == 15
    assert cluster.follower("c").high_watermark == 15


def test_acks_reach_followers_as_the_current_range_set() -> None:
    cluster = Cluster.start()
    cluster.publish(40)
    cluster.leader_sync()
    cluster.catch_up_all()
    for lo in range(0, 39, 3):
        cluster.ack(lo, lo + 2)
    cluster.catch_up_all()
    cluster.assert_converged()
    follower = cluster.follower("b")
    assert follower.cursor.acked == cluster.leader.cursor.acked
    assert follower.acked_version == cluster.leader.cursor_version
    # Acks are durable on the follower once applied.
    cluster.crash("b")
    cluster.restart("b")
    assert cluster.follower("b").cursor.acked == cluster.leader.cursor.acked


def test_resume_after_a_long_outage_with_acks_gets_the_current_set_not_a_replay() -> None:
    cluster = Cluster.start(limits=ReplicationLimits(lag_max_ms=1000))
    cluster.publish(10)
    cluster.leader_sync()
    cluster.catch_up_all()
    cluster.tick()
    shape_before = state_shape(cluster.core)
    # c is away while 3000 messages are published and acked one by one, out of order.
    rng = random.Random(7)
    for _ in range(300):
        cluster.now_ms += 50
        cluster.publish(10, size=8)
        cluster.leader_sync()
        cluster.fetch("b")
        cluster.fetch("b")
        cluster.tick()
        hw = cluster.core.high_watermark
        delivered = list(range(hw - 10, hw))
        rng.shuffle(delivered)  # consumers ack one by one, out of order, a few never
        for offset in delivered:
            if offset % 97:
                cluster.ack(offset, offset + 1)
    assert cluster.in_sync == ("a", "b")
    events = cluster.leader.cursor_version
    assert events > 2900
    ranges = len(cluster.leader.cursor.acked)
    # The leader keeps nothing per follower but its progress: nothing grew.
    assert state_shape(cluster.core) == {**shape_before, "_in_sync": 2}
    # c comes back: the stream starts at its next offset and the acks come as one set.
    entries_before = cluster.follower("c").cursor.entry_count
    verdicts = cluster.catch_up("c", max_bytes=4096)
    assert verdicts[0] == Stream(10)
    cluster.catch_up("b")
    cluster.assert_converged()
    written = cluster.follower("c").cursor.entry_count - entries_before
    assert written <= 2 * ranges + len(verdicts) < events // 4
    assert cluster.follower("c").cursor.acked == cluster.leader.cursor.acked
    assert cluster.tick() == ("a", "b", "c")
    assert state_shape(cluster.core) == shape_before


def test_truncation_after_a_leader_change() -> None:
    cluster = Cluster.start()
    cluster.publish(10)
    cluster.leader_sync()
    cluster.catch_up_all()
    # The leader of epoch 1 writes records nobody else gets, then is cut off.
    cluster.publish(5)
    cluster.leader_sync()
    lost = values(cluster.leader.log, 10)
    assert cluster.core.high_watermark == 10
    promotion = cluster.fail_over()
    assert promotion is not None
    assert promotion.leader == "b"  # equal ends: the longest running
    assert cluster.epoch == 2
    assert [(e.epoch, e.start_offset) for e in cluster.leader.history.entries] == [(1, 0),
                                                                                   (2, 10)]
    cluster.publish(7)
    cluster.leader_sync()
    # a comes back as b's follower: its epoch 1 ended at 10 here.
    assert cluster.follower("a").next_offset == 15
    assert cluster.fetch("a") == Truncate(10, 1)
    assert cluster.follower("a").next_offset == 10
    cluster.catch_up("a")
    cluster.catch_up("c")
    cluster.assert_converged()
    kept = values(cluster.follower("a").log, 10)
    assert kept == values(cluster.leader.log, 10)
    assert not set(kept.values()) & set(lost.values())
    assert cluster.core.high_watermark == 17


def test_a_chain_of_leader_changes_converges() -> None:
    """a (epoch 1) writes a tail only it holds; b leads epoch 2 and also writes a tail that
    only it holds; c leads epoch 3. a and b come back behind c and drop their tails."""
    cluster = Cluster.start(("a", "b", "c"))
    cluster.publish(10)
    cluster.leader_sync()
    cluster.catch_up_all()
    cluster.publish(3)
    cluster.leader_sync()
    cluster.crash("a")
    cluster.fail_over()
    assert cluster.leader_name == "b"
    cluster.catch_up("c")
    cluster.publish(4)
    cluster.leader_sync()
    cluster.crash("b")
    cluster.fail_over()
    assert cluster.leader_name == "c"
    assert cluster.epoch == 3
    cluster.publish(2)
    cluster.leader_sync()
    cluster.restart("a")
    cluster.restart("b")
    assert cluster.follower("b").last_epoch == 2
    # Neither shares more than epoch 1 with c, which ended at 10 there.
    assert cluster.fetch("a") == Truncate(10, 1)
    assert cluster.fetch("b") == Truncate(10, 1)
    cluster.catch_up("a")
    cluster.catch_up("b")
    cluster.assert_converged()
    for name in ("a", "b"):
        assert cluster.follower(name).history.entries == cluster.leader.history.entries
    assert [(e.epoch, e.start_offset) for e in cluster.leader.history.entries] == [(1, 0),
                                                                                  (3, 10)]


def test_a_follower_with_an_epoch_the_leader_lacks_cuts_where_its_own_epoch_ended() -> None:
    cluster = Cluster.start(("a", "b", "c"))
    cluster.publish(10)
    cluster.leader_sync()
    cluster.catch_up_all()
    # b leads epoch 2 and writes 4 records that only it holds, then it is gone.
    cluster.fail_over()
    assert cluster.leader_name == "b"
    cluster.publish(4)
    cluster.leader_sync()
    cluster.crash("b")
    # c leads epoch 3 (a is down at that moment), and writes on.
    cluster.crash("a")
    promotion = cluster.fail_over()
    assert promotion is not None
    assert promotion.leader == "c"
    cluster.restart("a")
    cluster.publish(6)
    cluster.leader_sync()
    cluster.catch_up("a")
    cluster.restart("b")
    assert cluster.follower("b").last_epoch == 2
    verdict = cluster.fetch("b")
    assert verdict == Truncate(10, 1)  # epoch 1 is the last one b shares with c
    assert cluster.follower("b").next_offset == 10
    cluster.catch_up("b")
    cluster.assert_converged()
    assert [e.epoch for e in cluster.follower("b").history.entries] == [1, 3]


def test_a_follower_below_the_leaders_log_start_resets_and_converges() -> None:
    cluster = Cluster.start()
    cluster.publish(5)
    cluster.leader_sync()
    cluster.catch_up_all()
    cluster.crash("c")
    for _ in range(20):
        cluster.publish(6, size=30)
        cluster.leader_sync()
        cluster.catch_up("b")
    cluster.now_ms += 5000
    assert cluster.tick() == ("a", "b")
    end = cluster.leader.log.next_offset
    cluster.ack(0, end - 3)
    assert cluster.delete_acked_segments() > 0
    start = cluster.leader.log.log_start_offset
    assert start > 5
    cluster.restart("c")
    verdicts = cluster.catch_up("c")
    assert verdicts[0] == Reset(start)
    cluster.catch_up("b")
    cluster.assert_converged()
    assert cluster.follower("c").log_start == start
    assert cluster.follower("c").cursor.acked.ack_floor == end - 3


def test_a_reset_follower_converges_after_a_leader_change_with_an_older_log_start() -> None:
    cluster = Cluster.start()
    cluster.publish(5)
    cluster.leader_sync()
    cluster.catch_up_all()
    cluster.crash("c")
    for _ in range(20):
        cluster.publish(6, size=30)
        cluster.leader_sync()
        cluster.fetch("b")
    cluster.catch_up("b")
    cluster.now_ms += 5000
    assert cluster.tick() == ("a", "b")
    cluster.ack(0, cluster.core.high_watermark)
    cluster.catch_up("b")
    # a deletes; b keeps its start (its one large segment straddles a's new start).
    cluster.delete_acked_segments()
    cluster.restart("c")
    cluster.catch_up("c")
    assert cluster.follower("c").log_start > cluster.follower("b").log_start
    cluster.fail_over()
    assert cluster.leader_name == "b"
    cluster.publish(3)
    cluster.leader_sync()
    cluster.catch_up("c")
    cluster.catch_up("a")
    cluster.assert_converged()


def test_a_follower_reset_just_before_a_leader_change_converges() -> None:
    """c is reset to a's log start and a fails over before c got a record: c now sits,
    empty and without epochs, above the log start of b, which has not deleted as much."""
    cluster = Cluster.start()
    cluster.publish(5)
    cluster.leader_sync()
    cluster.catch_up_all()
    cluster.crash("c")
    for _ in range(20):
        cluster.publish(6, size=30)
        cluster.leader_sync()
        cluster.fetch("b")
    cluster.catch_up("b")
    cluster.now_ms += 5000
    assert cluster.tick() == ("a", "b")
    cluster.ack(0, cluster.core.high_watermark)
    cluster.delete_acked_segments()
    a_start = cluster.leader.log.log_start_offset
    cluster.restart("c")
    assert cluster.fetch("c") == Reset(a_start)
    replica = cluster.follower("c")
    assert (replica.log_start, replica.next_offset, replica.last_epoch) == (a_start, a_start, 0)
    cluster.fail_over()
    assert cluster.leader_name == "b"
    assert cluster.leader.log.log_start_offset < a_start
    cluster.publish(3)
    cluster.leader_sync()
    cluster.catch_up("c")
    cluster.catch_up("a")
    # a took acks b never heard of (b will redeliver those messages); a, whose log starts
    # above b's, copies b's log again from its start and takes b's ack set.
    cluster.assert_converged(exact_acks=False)
    assert cluster.follower("c").next_offset == cluster.leader.log.next_offset


def test_a_new_leader_never_empties_an_in_sync_follower() -> None:
    """c followed a's retention further than b did; b, the new leader, must not throw away
    c's copy of the confirmed, unacked messages: c is in sync and may be promoted next."""
    cluster = Cluster.start(follower_log=LEADER_LOG)
    for _ in range(8):
        cluster.publish(5, size=30)
    cluster.leader_sync()
    cluster.catch_up_all()
    cluster.ack(0, 10)
    cluster.catch_up_all()  # b's last fetch: its ack floor is 10
    cluster.ack(10, 25)  # 25..40 stay unacked (and confirmed)
    cluster.delete_acked_segments()
    cluster.catch_up("c")  # c follows a's log start
    assert cluster.follower("c").log_start > cluster.follower("b").cursor.ack_floor
    confirmed = values(cluster.leader.log, 25)
    assert max(confirmed) < cluster.core.high_watermark
    cluster.crash("a")
    assert cluster.fail_over() == Promotion("b", ("b", "c"), out_of_sync=False)
    cluster.fetch("c")
    cluster.crash("b")
    promotion = cluster.fail_over()
    assert promotion is not None
    assert promotion.leader == "c"
    assert values(cluster.leader.log, 25) == confirmed
    cluster.restart("a")
    cluster.restart("b")
    cluster.catch_up_all()
    cluster.assert_converged(exact_acks=False)


@pytest.mark.parametrize("seed", range(8))
def test_a_follower_crash_then_reopen_resumes_and_converges(seed: int) -> None:
    rng = random.Random(seed)
    cluster = Cluster.start()
    for _ in range(12):
        cluster.publish(rng.randint(1, 6))
        cluster.leader_sync()
        cluster.fetch("b", max_bytes=rng.randint(50, 400))
        cluster.fetch("c")
        hw = cluster.core.high_watermark
        if hw:
            lo = rng.randrange(hw)
            cluster.ack(lo, min(hw, lo + 3))
    confirmed = cluster.core.high_watermark
    # b loses power somewhere in its handling of a fetch (append, sync, acks).
    cluster.publish(5)
    cluster.leader_sync()
    cluster.fetch("b", cut=PowerCutAt(rng.randrange(12), rng))
    cluster.restart("b")
    assert cluster.follower("b").next_offset >= confirmed
    cluster.catch_up("b")
    cluster.catch_up("c")
    cluster.assert_converged()
    # And a crash at any later moment loses nothing b had reported.
    reported = cluster.follower("b").next_offset
    cluster.crash("b", rng)
    cluster.restart("b")
    assert cluster.follower("b").next_offset == reported
    cluster.catch_up("b")
    cluster.assert_converged()


def test_a_crash_that_loses_the_epochs_of_new_records_is_repaired() -> None:
    cluster = Cluster.start()
    cluster.publish(10)
    cluster.leader_sync()
    cluster.catch_up_all()
    cluster.fail_over()  # b leads epoch 2 from 10
    cluster.publish(5)
    cluster.leader_sync()
    # c's records of epoch 2 are on its disk but its epoch file does not know epoch 2
    # (what a crash could leave if the records were written before the epochs): the
    # leader's check still finds them divergent, as records of epoch 1 past its end.
    replica = cluster.follower("c")
    batches = cluster.leader.log.read_batches(10)
    for batch in batches:
        replica.log.append_raw_batch(batch.data)
    replica.sync()
    cluster.crash("c")
    cluster.restart("c")
    assert cluster.follower("c").next_offset == 15
    assert cluster.follower("c").last_epoch == 1
    assert cluster.fetch("c") == Truncate(10, 1)
    cluster.catch_up("c")
    cluster.catch_up("a")
    cluster.assert_converged()


def records_without_their_epoch_scenario(step: int, seed: int) -> None:
    cluster = Cluster.start()
    cluster.publish(10)
    cluster.leader_sync()
    cluster.catch_up_all()
    cluster.publish(5)  # a's tail of epoch 1 that nobody else gets
    cluster.leader_sync()
    cluster.fail_over()
    assert cluster.leader_name == "b"
    cluster.publish(4)  # b's records of epoch 2 at the same offsets
    cluster.leader_sync()
    # c receives them and loses power `step` file operations into its handling.
    assert cluster.fetch("c", cut=PowerCutAt(step, random.Random(seed))) == Stream(10)
    cluster.restart("c")
    # b is gone: c, the one in-sync replica left, leads epoch 3.
    cluster.crash("b")
    promotion = cluster.fail_over()
    assert promotion is not None
    assert promotion.leader == "c"
    cluster.publish(2)
    cluster.leader_sync()
    # a, with its own epoch 1 records at 10..15, follows c, then b does.
    cluster.catch_up("a")
    cluster.restart("b")
    cluster.catch_up("b")
    cluster.assert_converged()


@pytest.mark.parametrize("step", range(9))
def test_records_without_their_epoch_must_not_survive_a_crash(step: int) -> None:
    """If c's copy of b's epoch 2 records outlived their epoch entry, c, promoted, would
    label them epoch 1, and a, which holds its own epoch 1 records at those offsets, would
    keep them: two replicas with different messages at the same offsets."""
    for seed in range(4):
        records_without_their_epoch_scenario(step, seed)


def test_a_fetch_with_the_old_epoch_is_refused() -> None:
    cluster = Cluster.start()
    cluster.publish(3)
    cluster.leader_sync()
    cluster.catch_up_all()
    cluster.fail_over()
    verdict = cluster.core.on_fetch("a", 1, 3, 1, cluster.leader.history, 0, 0)
    assert isinstance(verdict, Refuse)
    assert batch_bytes(cluster.follower("a").log) == batch_bytes(cluster.leader.log)


# ------------------------------------------------------------------ random histories

Op = tuple[str, int, int]

OPS: st.SearchStrategy[Op] = st.one_of(
    st.tuples(st.just("publish"), st.integers(1, 6), st.integers(5, 60)),
    st.tuples(st.just("sync"), st.just(0), st.just(0)),
    st.tuples(st.just("fetch"), st.integers(0, 1), st.sampled_from([60, 300, 1 << 20])),
    st.tuples(st.just("fetch"), st.integers(0, 1), st.sampled_from([60, 300, 1 << 20])),
    st.tuples(st.just("fetch_cut"), st.integers(0, 1), st.integers(0, 2**16)),
    st.tuples(st.just("crash"), st.integers(0, 2), st.integers(0, 2**16)),
    st.tuples(st.just("ack"), st.integers(0, 100), st.integers(1, 20)),
    st.tuples(st.just("time"), st.integers(100, 3000), st.just(0)),
    st.tuples(st.just("move"), st.just(0), st.just(0)),
    st.tuples(st.just("delete"), st.integers(0, 1), st.just(0)),
)


class Model:
    """What must hold whatever happens: confirmed records never change or vanish."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.confirmed: dict[int, bytes] = {}
        self.leader = cluster.leader_name
        self.epoch = cluster.epoch
        self.high_watermark = 0

    def check(self) -> None:
        cluster = self.cluster
        core = cluster.core
        assert cluster.leader_name in core.in_sync
        assert core.high_watermark <= core.durable_end <= cluster.leader.log.next_offset
        if (cluster.leader_name, cluster.epoch) == (self.leader, self.epoch):
            assert core.high_watermark >= self.high_watermark
        self.leader, self.epoch = cluster.leader_name, cluster.epoch
        self.high_watermark = core.high_watermark
        leader_values = values(cluster.leader.log)
        for offset in range(cluster.leader.log.log_start_offset, core.high_watermark):
            self.confirmed.setdefault(offset, leader_values[offset])
        for name in cluster.in_sync:
            node = cluster.nodes[name]
            if not node.up:
                continue
            held = values(node.log)
            for offset, value in self.confirmed.items():
                if offset >= node.log.log_start_offset:
                    assert held.get(offset) == value, (name, offset)

    def check_stream(self, name: str) -> None:
        """After a Stream, the follower's records are the leader's wherever both have them."""
        follower = self.cluster.follower(name).log
        leader = self.cluster.leader.log
        start = max(follower.log_start_offset, leader.log_start_offset)
        mine, theirs = values(follower, start), values(leader, start)
        assert {o: v for o, v in mine.items() if o in theirs} == {
            o: v for o, v in theirs.items() if o in mine}, name


def run(ops: list[Op]) -> Cluster:
    """Play `ops` on a 3-node queue checking the model after each, then heal and check
    that every replica converged and a steadily fed cluster keeps everyone in sync."""
    cluster = Cluster.start(limits=ReplicationLimits(lag_max_ms=1000, lag_max_messages=40),
                            follower_log=LEADER_LOG)
    model = Model(cluster)
    for kind, x, y in ops:
        followers = cluster.followers()
        if kind == "publish":
            cluster.publish(x, y)
        elif kind == "sync":
            cluster.leader_sync()
        elif kind == "fetch" and followers:
            name = followers[x % len(followers)]
            if isinstance(cluster.fetch(name, y), Stream):
                model.check_stream(name)
        elif kind == "fetch_cut" and followers:
            name = followers[x % len(followers)]
            rng = random.Random(y)
            cluster.fetch(name, rng.choice([60, 300, 1 << 20]), PowerCutAt(rng.randrange(16), rng))
            cluster.restart(name)
        elif kind == "crash":
            name = cluster.names[x]
            cluster.crash(name, random.Random(y))
            if name == cluster.leader_name and cluster.fail_over() is None:
                # The queue waits for its only in-sync replica, which leads again.
                cluster.restart(name)
                cluster.promote(name, cluster.in_sync, 0)
            else:
                cluster.restart(name)
        elif kind == "ack":
            hw = cluster.core.high_watermark
            if hw:
                lo = hw * x // 101
                cluster.ack(lo, min(hw, lo + y))
        elif kind == "time":
            cluster.now_ms += x
            cluster.tick()
        elif kind == "move":
            cluster.fail_over()
        elif kind == "delete":
            if x:  # consumers drained the queue first
                cluster.ack(0, cluster.core.high_watermark)
            cluster.delete_acked_segments()
        model.check()
    # Heal: everyone is up and fetches until the queue is whole again.
    for name in cluster.names:
        if not cluster.nodes[name].up:
            cluster.restart(name)
    cluster.leader_sync()
    cluster.catch_up_all(max_bytes=500)
    cluster.tick()
    cluster.catch_up_all()
    model.check()
    cluster.assert_converged(exact_acks=False)
    assert cluster.core.high_watermark == cluster.leader.log.next_offset
    # A steady stream of publishes, every follower keeping up: everyone is in sync.
    for _ in range(10):
        cluster.now_ms += 300
        cluster.publish(2)
        cluster.leader_sync()
        for name in cluster.followers():
            cluster.fetch(name)
        cluster.tick()
    assert set(cluster.in_sync) == set(cluster.names)
    assert cluster.core.publish_refusal() is None
    model.check()
    return cluster


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, max_size=40))
def test_random_histories_keep_confirmed_records_and_converge(ops: list[Op]) -> None:
    run(ops)


def test_a_follower_whose_epoch_the_leader_compacted_away_keeps_what_it_holds() -> None:
    """Found by the random histories: b leads epoch 2 from offset 1 and deletes the
    settled offset 0, forgetting epoch 1. c, at offset 1 in epoch 1, must be streamed
    from 1 (Kafka's answer for an epoch older than the history), not cut to 0."""
    cluster = run([("publish", 1, 5), ("fetch", 0, 60), ("fetch", 1, 60), ("crash", 0, 0),
                   ("fetch", 1, 60), ("delete", 1, 0), ("fetch", 1, 60)])
    assert cluster.leader_name == "b"
