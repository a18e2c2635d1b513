"""The batch forms of the publish path decide exactly what their one-message forms do."""

from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.message import Message, Properties, records_of
from logbroker.queue.consumers import Consumer
from logbroker.queue.effects import Deliver
from logbroker.queue.length_limit import LengthLimit
from logbroker.queue.message_meta import MessageMeta, MetaRun, meta_of, metas_of
from logbroker.queue.queue_core import QueueCore
from logbroker.queue.queue_limits import Overflow, QueueLimits

metas_strategy = st.lists(
    st.builds(MessageMeta, st.integers(0, 50), st.sampled_from([0, 0, 5, 10]),
              st.integers(0, 3)), min_size=1, max_size=12)
limits_strategy = st.builds(
    QueueLimits, max_length=st.none() | st.integers(0, 6),
    max_length_bytes=st.none() | st.integers(0, 120), overflow=st.sampled_from(list(Overflow)))


def _observed(core: QueueCore, now_ms: int) -> tuple[object, ...]:
    core.add_consumer(Consumer("c", "ch", prefetch_count=0), now_ms=now_ms)
    deliveries = [(e.offset, e.redelivered) for e in core.pump(now_ms) if isinstance(e, Deliver)]
    return core.next_offset, core.message_count, core.ready_bytes, deliveries


@settings(max_examples=150, deadline=None)
@given(limits_strategy, st.none() | st.integers(1, 3), st.lists(metas_strategy, max_size=3),
       st.integers(0, 30), st.integers(0, 8))
def test_enqueue_many_is_enqueue_one_by_one(
    limits: QueueLimits, max_priority: int | None, batches: list[list[MessageMeta]],
    delivered_below: int, now_ms: int,
) -> None:
    batched = QueueCore(limits, max_priority=max_priority)
    single = QueueCore(limits, max_priority=max_priority)
    for metas in batches:
        first = single.next_offset
        expected = [effect for index, meta in enumerate(metas) for effect in single.enqueue(
            first + index, meta, first + index < delivered_below)]
        run = MetaRun.of(metas)
        assert list(run) == metas and [run[i] for i in range(len(run))] == metas
        assert batched.enqueue_many(batched.next_offset, run, delivered_below) == expected
    assert _observed(batched, now_ms) == _observed(single, now_ms)


def test_accepts_all_only_without_a_reject_publish_limit() -> None:
    assert LengthLimit(QueueLimits()).accepts_all
    assert LengthLimit(QueueLimits(max_length=1, overflow=Overflow.DROP_HEAD)).accepts_all
    assert not LengthLimit(QueueLimits(max_length=1, overflow=Overflow.REJECT_PUBLISH)).accepts_all
    assert not LengthLimit(QueueLimits(max_length_bytes=9,
                                       overflow=Overflow.REJECT_PUBLISH_DLX)).accepts_all
    limit = LengthLimit(QueueLimits())
    limit.set_limits(QueueLimits(max_length=1, overflow=Overflow.REJECT_PUBLISH))  # a policy
    assert not limit.accepts_all and not limit.drops_per_message


expirations = st.sampled_from([None, "", "0", "250", "1000", "abc", "-5"])
priorities = st.none() | st.integers(0, 300)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(expirations, priorities, st.binary(max_size=20)), min_size=1,
                max_size=10), st.none() | st.integers(0, 5000), st.integers(0, 10**12))
def test_metas_of_is_meta_of_each(
    shapes: list[tuple[str | None, int | None, bytes]], ttl_ms: int | None, now_ms: int,
) -> None:
    messages = [Message("", "q", body, Properties(expiration=expiration, priority=priority))
                for expiration, priority, body in shapes]
    expected = [meta_of(message, ttl_ms, now_ms) for message in messages]
    assert list(metas_of(messages, ttl_ms, now_ms)) == expected
    same = [messages[0]] * 3  # one (expiration, priority) for the whole batch
    assert list(metas_of(same, ttl_ms, now_ms)) == [meta_of(messages[0], ttl_ms, now_ms)] * 3


def test_records_of_is_to_record_each_and_shares_equal_headers() -> None:
    persistent = Properties(delivery_mode=2)
    messages = [Message("ex", "a", b"1", persistent, timestamp_ms=5),
                Message("ex", "a", b"2", persistent, timestamp_ms=6),
                Message("ex", "b", b"3", persistent, timestamp_ms=7),
                Message("", "a", b"4", Properties(priority=3), timestamp_ms=8)]
    records = records_of(messages)
    assert records == [message.to_record() for message in messages]
    assert records[0].headers is records[1].headers
    assert records[1].headers is not records[2].headers


def test_admit_all_counts_as_admit_each() -> None:
    sizes = (3, 0, 9)
    together, one_by_one = QueueCore(QueueLimits()), QueueCore(QueueLimits())
    assert together.admit_all(list(sizes))
    for size in sizes:
        one_by_one.admit(size)
    assert ((together.length.pending_count, together.length.pending_bytes)
            == (one_by_one.length.pending_count, one_by_one.length.pending_bytes) == (3, 12))
