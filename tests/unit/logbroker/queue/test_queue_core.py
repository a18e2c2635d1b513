from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.queue.consumers import Consumer
from logbroker.queue.effects import DeadLetter, DeadLetterReason, Deliver, QueueExpired, Settle
from logbroker.queue.message_meta import MessageMeta
from logbroker.queue.queue_core import ConsumerRefused, QueueCore
from logbroker.queue.queue_limits import Admission, Overflow, QueueLimits


def fill(core: QueueCore, count: int, size: int = 10, **meta: int) -> None:
    for _ in range(count):
        assert core.enqueue(core.next_offset, MessageMeta(size, **meta)) == []


def delivered(effects: list) -> list[tuple[int, str | None, bool]]:
    return [(e.offset, e.consumer_tag, e.redelivered) for e in effects if isinstance(e, Deliver)]


def settles(effects: list) -> list[tuple[int, int]]:
    return [(e.lo, e.hi) for e in effects if isinstance(e, Settle)]


def test_fifo_delivery_respects_prefetch_and_acks_settle() -> None:
    core = QueueCore(QueueLimits())
    fill(core, 5)
    core.add_consumer(Consumer("c1", "ch1", prefetch_count=2), now_ms=0)
    assert delivered(core.pump(0)) == [(0, "c1", False), (1, "c1", False)]
    assert core.pump(0) == []
    assert (core.message_count, core.unacked_count) == (3, 2)
    assert settles(core.ack([0])) == [(0, 1)]
    assert delivered(core.pump(0)) == [(2, "c1", False)]


def test_held_by_channels_picks_the_offsets_a_forwarding_nodes_channels_hold() -> None:
    core = QueueCore(QueueLimits())
    fill(core, 4)
    core.add_consumer(Consumer("far", "c|conn-c:1", prefetch_count=2), now_ms=0)
    assert delivered(core.pump(0)) == [(0, "far", False), (1, "far", False)]
    core.add_consumer(Consumer("near", "conn-a:1", prefetch_count=1), now_ms=0)
    assert delivered(core.pump(0)) == [(2, "near", False)]
    assert core.held_by_channels([0, 1, 2, 3, 9], "c|") == [0, 1]
    assert core.held_by_channels([0, 2], "b|") == []


def test_requeued_message_keeps_its_place_and_is_flagged_redelivered() -> None:
    core = QueueCore(QueueLimits())
    fill(core, 4)
    core.add_consumer(Consumer("c1", "ch1", prefetch_count=2), now_ms=0)
    core.pump(0)
    assert core.reject([1], requeue=True) == []
    core.ack([0])
    assert delivered(core.pump(0)) == [(1, "c1", True), (2, "c1", False)]


def test_round_robin_and_consumer_priorities() -> None:
    core = QueueCore(QueueLimits())
    fill(core, 6)
    core.add_consumer(Consumer("a", "ch1"), now_ms=0)
    core.add_consumer(Consumer("b", "ch2"), now_ms=0)
    assert [tag for _, tag, _ in delivered(core.pump(0))] == ["a", "b", "a", "b", "a", "b"]
    core = QueueCore(QueueLimits())
    fill(core, 3)
    core.add_consumer(Consumer("low", "ch1", prefetch_count=10), now_ms=0)
    core.add_consumer(Consumer("high", "ch2", prefetch_count=2, priority=5), now_ms=0)
    assert [tag for _, tag, _ in delivered(core.pump(0))] == ["high", "high", "low"]


def test_channel_credit_limits_global_prefetch() -> None:
    core = QueueCore(QueueLimits())
    fill(core, 5)
    core.add_consumer(Consumer("a", "ch1"), now_ms=0)
    assert len(delivered(core.pump(0, {"ch1": 3}))) == 3


def test_single_active_consumer_hands_over_in_registration_order() -> None:
    core = QueueCore(QueueLimits(), single_active_consumer=True)
    fill(core, 4)
    core.add_consumer(Consumer("first", "ch1", prefetch_count=1), now_ms=0)
    core.add_consumer(Consumer("second", "ch2"), now_ms=0)
    assert delivered(core.pump(0)) == [(0, "first", False)]
    core.remove_consumer("first", now_ms=0)
    core.requeue_channel("ch1")
    assert [tag for _, tag, _ in delivered(core.pump(0))] == ["second"] * 4


def test_exclusive_consumer_and_reused_tag_are_refused() -> None:
    core = QueueCore(QueueLimits())
    core.add_consumer(Consumer("a", "ch1", exclusive=True), now_ms=0)
    for consumer in (Consumer("b", "ch2"), Consumer("a", "ch1")):
        try:
            core.add_consumer(consumer, now_ms=0)
        except ConsumerRefused as refused:
            assert refused.reply_code in (403, 530)
        else:
            raise AssertionError("consumer should have been refused")


def test_no_ack_delivery_settles_immediately() -> None:
    core = QueueCore(QueueLimits())
    fill(core, 2)
    core.add_consumer(Consumer("a", "ch1", prefetch_count=1, no_ack=True), now_ms=0)
    effects = core.pump(0)
    assert len(delivered(effects)) == 2  # prefetch does not apply to no-ack consumers
    assert settles(effects) == [(0, 2)]
    assert core.unacked_count == 0


def test_basic_get_and_empty_queue() -> None:
    core = QueueCore(QueueLimits())
    assert core.get("ch1", no_ack=False, now_ms=0) == []
    fill(core, 1)
    assert delivered(core.get("ch1", no_ack=False, now_ms=0)) == [(0, None, False)]
    assert core.requeue_channel("ch1") == []
    assert delivered(core.get("ch1", no_ack=True, now_ms=0)) == [(0, None, True)]


def test_message_ttl_expires_at_the_head_and_dead_letters() -> None:
    core = QueueCore(QueueLimits(dead_letter=True))
    core.enqueue(0, MessageMeta(10, expires_at_ms=100))
    core.enqueue(1, MessageMeta(10, expires_at_ms=500))
    assert core.next_deadline_ms() == 101
    effects = core.tick(200)
    assert effects == [DeadLetter(0, DeadLetterReason.EXPIRED), Settle(0, 1)]
    core.add_consumer(Consumer("a", "ch1"), now_ms=200)
    assert delivered(core.pump(200)) == [(1, "a", False)]


def test_expired_message_without_dlx_is_dropped_on_get() -> None:
    core = QueueCore(QueueLimits())
    core.enqueue(0, MessageMeta(10, expires_at_ms=100))
    core.enqueue(1, MessageMeta(10))
    assert core.get("ch", no_ack=False, now_ms=150) == [Deliver(1, None, "ch", False, False),
                                                         Settle(0, 1)]


def test_max_length_drop_head_dead_letters_the_oldest() -> None:
    core = QueueCore(QueueLimits(max_length=2, dead_letter=True))
    fill(core, 2)
    effects = core.enqueue(2, MessageMeta(10))
    assert effects == [DeadLetter(0, DeadLetterReason.MAXLEN), Settle(0, 1)]
    core = QueueCore(QueueLimits(max_length_bytes=25))
    fill(core, 2)
    assert settles(core.enqueue(2, MessageMeta(10))) == [(0, 1)]
    assert core.ready_bytes == 20


def test_requeue_over_a_drop_head_limit_drops_the_head() -> None:
    core = QueueCore(QueueLimits(max_length=2, dead_letter=True))
    core.add_consumer(Consumer("a", "ch1", prefetch_count=1), now_ms=0)
    fill(core, 1)
    assert delivered(core.pump(0)) == [(0, "a", False)]
    fill(core, 2)
    # 0 goes back to its place at the front, making three ready: the head goes.
    assert core.reject([0], requeue=True) == [DeadLetter(0, DeadLetterReason.MAXLEN),
                                              Settle(0, 1)]
    assert core.message_count == 2
    rejecting = QueueCore(QueueLimits(max_length=1, overflow=Overflow.REJECT_PUBLISH))
    rejecting.add_consumer(Consumer("a", "ch1", prefetch_count=1), now_ms=0)
    fill(rejecting, 1)
    rejecting.pump(0)
    fill(rejecting, 1)
    # reject-publish only refuses publishes; a requeue is never lost.
    assert rejecting.reject([0], requeue=True) == []
    assert rejecting.message_count == 2


def test_reject_publish_admission() -> None:
    core = QueueCore(QueueLimits(max_length=1, overflow=Overflow.REJECT_PUBLISH))
    assert core.admit(10) is Admission.ACCEPT
    fill(core, 1)
    assert core.admit(10) is Admission.REJECT
    dlx = QueueCore(QueueLimits(max_length=0, overflow=Overflow.REJECT_PUBLISH_DLX,
                                dead_letter=True))
    assert dlx.admit(10) is Admission.REJECT_DEAD_LETTER
    by_bytes = QueueCore(QueueLimits(max_length_bytes=15, overflow=Overflow.REJECT_PUBLISH))
    fill(by_bytes, 1)
    assert by_bytes.admit(6) is Admission.REJECT
    assert by_bytes.admit(5) is Admission.ACCEPT


def test_reject_without_requeue_dead_letters() -> None:
    core = QueueCore(QueueLimits(dead_letter=True))
    fill(core, 2)
    core.add_consumer(Consumer("a", "ch1"), now_ms=0)
    core.pump(0)
    assert core.reject([1, 0], requeue=False) == [
        DeadLetter(0, DeadLetterReason.REJECTED), DeadLetter(1, DeadLetterReason.REJECTED),
        Settle(0, 2)]
    assert core.reject([0], requeue=False) == []  # already settled: ignored


def test_purge_takes_ready_but_not_unacked() -> None:
    core = QueueCore(QueueLimits())
    fill(core, 5)
    core.get("ch", no_ack=False, now_ms=0)
    count, effects = core.purge()
    assert count == 4 and settles(effects) == [(1, 5)]
    assert core.unacked_count == 1 and core.ready_bytes == 0


def test_queue_expires_when_unused() -> None:
    core = QueueCore(QueueLimits(expires_ms=1000), now_ms=0)
    assert core.tick(999) == []
    core.touch(500)
    assert core.tick(1499) == []
    assert core.tick(1500) == [QueueExpired()]
    assert core.tick(3000) == []  # once
    busy = QueueCore(QueueLimits(expires_ms=10))
    busy.add_consumer(Consumer("a", "ch"), now_ms=0)
    assert busy.tick(100) == []


def test_priority_queue_delivers_highest_first_then_in_order() -> None:
    core = QueueCore(QueueLimits(), max_priority=5)
    for priority in (0, 9, 3, 5, 3):
        core.enqueue(core.next_offset, MessageMeta(10, priority=priority))
    core.add_consumer(Consumer("a", "ch"), now_ms=0)
    assert [offset for offset, _, _ in delivered(core.pump(0))] == [1, 3, 2, 4, 0]


def test_policy_change_applies_to_queued_messages() -> None:
    core = QueueCore(QueueLimits())
    fill(core, 5)
    assert settles(core.set_limits(QueueLimits(max_length=2))) == [(0, 3)]
    assert core.message_count == 2


def test_recover_rebuilds_ready_set_with_redelivered_flags() -> None:
    # offsets 0..9; 0-2 and 5 acked; 3, 4 were possibly delivered before the restart.
    core = QueueCore.recover(
        QueueLimits(), ack_floor=3, next_offset=10, acked=[(5, 6)],
        metas=[MessageMeta(10)] * 7, delivered_below=6,
    )
    assert core.message_count == 6 and core.ready_bytes == 60
    core.add_consumer(Consumer("a", "ch"), now_ms=0)
    got = delivered(core.pump(0))
    assert [(offset, redelivered) for offset, _, redelivered in got] == [
        (3, True), (4, True), (6, False), (7, False), (8, False), (9, False)]
    core.enqueue(10, MessageMeta(10))
    assert delivered(core.pump(0)) == [(10, "a", False)]


operations = st.lists(
    st.tuples(st.sampled_from(["enqueue", "pump", "ack", "nack", "requeue", "get", "purge",
                               "cancel", "consume", "tick"]), st.integers(0, 5)),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(operations, st.booleans(), st.sampled_from([None, 3]), st.sampled_from([None, 4]))
def test_every_message_is_in_exactly_one_state(
    ops: list[tuple[str, int]], priority_queue: bool, max_length: int | None,
    ttl: int | None,
) -> None:
    core = QueueCore(QueueLimits(max_length=max_length, dead_letter=True),
                     max_priority=3 if priority_queue else None)
    settled: set[int] = set()
    unacked: set[int] = set()
    consumers = 0

    def apply(effects: list) -> None:
        dead: set[int] = set()
        for effect in effects:
            if isinstance(effect, Deliver):
                assert effect.offset not in settled and effect.offset not in unacked
                if not effect.no_ack:
                    unacked.add(effect.offset)
            elif isinstance(effect, DeadLetter):
                dead.add(effect.offset)
            elif isinstance(effect, Settle):
                for offset in range(effect.lo, effect.hi):
                    assert offset not in settled, "settled twice"
                    settled.add(offset)
                    dead.discard(offset)
        assert not dead, "dead-lettered but never settled"

    for now, (op, arg) in enumerate(ops, start=1):
        if op == "enqueue":
            expires = now + ttl if ttl is not None else 0
            apply(core.enqueue(core.next_offset, MessageMeta(arg + 1, expires, arg)))
        elif op == "pump":
            apply(core.pump(now))
        elif op == "consume":
            consumers += 1
            core.add_consumer(Consumer(f"c{consumers}", f"ch{arg % 2}", prefetch_count=arg),
                              now_ms=now)
        elif op == "cancel" and consumers:
            core.remove_consumer(f"c{consumers}", now_ms=now)
        elif op in ("ack", "nack") and unacked:
            chosen = sorted(unacked)[arg % len(unacked)]
            unacked.discard(chosen)
            apply(core.ack([chosen]) if op == "ack" else core.reject([chosen], arg % 2 == 0))
        elif op == "requeue":
            for offset in core.unacked_of(f"ch{arg % 2}"):
                unacked.discard(offset)
            apply(core.requeue_channel(f"ch{arg % 2}"))
        elif op == "get":
            apply(core.get(f"ch{arg % 2}", no_ack=arg % 3 == 0, now_ms=now))
        elif op == "purge":
            apply(core.purge()[1])
        elif op == "tick":
            apply(core.tick(now))
        assert core.unacked_count == len(unacked)
        assert core.message_count + len(unacked) + len(settled) == core.next_offset
        if max_length is not None:
            assert core.message_count <= max_length


def test_no_ack_consumers_respect_channel_back_pressure() -> None:
    core = QueueCore(QueueLimits())
    fill(core, 10)
    core.add_consumer(Consumer("a", "ch1", no_ack=True), now_ms=0)
    assert core.pump(0, {"ch1": 0}) == []  # the channel's socket is congested
    assert len(delivered(core.pump(0, {"ch1": 4}))) == 4
    assert len(delivered(core.pump(0))) == 6


def test_a_consumer_may_hold_its_lookahead_beyond_its_prefetch() -> None:
    core = QueueCore(QueueLimits())
    fill(core, 10)
    core.add_consumer(Consumer("c1", "ch1", prefetch_count=2, lookahead=3), now_ms=0)
    assert len(delivered(core.pump(0))) == 5
    core.ack([0])
    assert delivered(core.pump(0)) == [(5, "c1", False)]
    core = QueueCore(QueueLimits())
    fill(core, 10)
    core.add_consumer(Consumer("c1", "ch1", lookahead=3), now_ms=0)  # no prefetch: no limit
    assert len(delivered(core.pump(0))) == 10


def test_returned_undelivered_messages_keep_their_place_and_their_flag() -> None:
    core = QueueCore(QueueLimits())
    fill(core, 5)
    core.add_consumer(Consumer("c1", "ch1", prefetch_count=2, lookahead=2), now_ms=0)
    core.pump(0)  # 0..3 to ch1
    assert core.reject([1], requeue=True) == []
    core.ack([3])
    assert delivered(core.pump(0)) == [(1, "c1", True), (4, "c1", False)]
    # ch1's node buffered 1 (flagged before), 2 and 4 and its client never got them.
    core.return_undelivered([4, 2, 1, 0, 99], "ch2", "c1")  # not ch2's: nothing happens
    core.return_undelivered([4, 2, 1, 0, 99], "ch1", "c2")  # nor c2's
    assert (core.message_count, core.unacked_count) == (0, 4)
    core.return_undelivered([4, 2, 1, 3, 99], "ch1", "c1")  # 3 is acked already
    assert (core.message_count, core.unacked_count) == (3, 1)
    assert core.roster.get("c1").unacked == 1  # type: ignore[union-attr]
    core.ack([0])
    assert delivered(core.pump(0)) == [(1, "c1", True), (2, "c1", False), (4, "c1", False)]
    core.return_undelivered([2], "ch1", "c1")
    assert core.requeue_channel("ch1") == []
    assert delivered(core.get("ch3", no_ack=False, now_ms=0)) == [(1, None, True)]
    assert delivered(core.get("ch3", no_ack=False, now_ms=0)) == [(2, None, False)]
    assert delivered(core.get("ch3", no_ack=False, now_ms=0)) == [(4, None, True)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["enqueue", "pump", "return", "requeue", "ack"]),
                          st.integers(0, 5)), max_size=60))
def test_returned_messages_stay_in_exactly_one_state_and_flagged_only_if_seen(
    ops: list[tuple[str, int]],
) -> None:
    core = QueueCore(QueueLimits())
    core.add_consumer(Consumer("c", "ch", prefetch_count=2, lookahead=2), now_ms=0)
    unacked: dict[int, bool] = {}  # offset -> its delivery reached a client
    seen: set[int] = set()
    acked = 0
    for op, arg in ops:
        if op == "enqueue":
            fill(core, 1)
        elif op == "pump":
            for offset, _tag, redelivered in delivered(core.pump(0)):
                assert redelivered == (offset in seen)
                unacked[offset] = arg % 2 == 0  # the client got it, or it stays buffered
                if unacked[offset]:
                    seen.add(offset)
        elif op == "return":
            buffered = [o for o, reached in unacked.items() if not reached]
            core.return_undelivered(buffered, "ch", "c")
            for offset in buffered:
                del unacked[offset]
        elif op == "requeue":
            core.requeue_channel("ch")
            seen.update(unacked)
            unacked.clear()
        elif op == "ack" and unacked:
            offset = sorted(unacked)[arg % len(unacked)]
            core.ack([offset])
            del unacked[offset]
            acked += 1
        assert core.unacked_count == len(unacked)
        assert core.message_count + len(unacked) + acked == core.next_offset
