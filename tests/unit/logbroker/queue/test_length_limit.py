"""LengthLimit: admitted publishes count against reject-publish limits until written;
drop-head never refuses and says when the head must go."""

from logbroker.queue.length_limit import LengthLimit
from logbroker.queue.queue_limits import Admission, Overflow, QueueLimits


def test_admitted_messages_count_until_written() -> None:
    limit = LengthLimit(QueueLimits(max_length=3, overflow=Overflow.REJECT_PUBLISH))
    assert limit.admit(10, ready_count=0, ready_bytes=0) is Admission.ACCEPT
    assert limit.admit(5, ready_count=0, ready_bytes=0) is Admission.ACCEPT
    assert (limit.pending_count, limit.pending_bytes) == (2, 15)
    # One ready plus two admitted: the limit of three is reached.
    assert limit.admit(1, ready_count=1, ready_bytes=1) is Admission.REJECT
    limit.written(1, 10)
    assert (limit.pending_count, limit.pending_bytes) == (1, 5)
    limit.written(2, 15)  # never below zero
    assert (limit.pending_count, limit.pending_bytes) == (0, 0)


def test_pending_bytes_count_against_the_byte_limit() -> None:
    limit = LengthLimit(QueueLimits(max_length_bytes=20, overflow=Overflow.REJECT_PUBLISH_DLX,
                                    dead_letter=True))
    assert limit.admit(12, ready_count=0, ready_bytes=0) is Admission.ACCEPT
    assert limit.admit(9, ready_count=0, ready_bytes=0) is Admission.REJECT_DEAD_LETTER
    assert limit.admit(8, ready_count=0, ready_bytes=0) is Admission.ACCEPT


def test_admit_all_counts_as_admitting_each_and_only_without_a_reject_limit() -> None:
    together = LengthLimit(QueueLimits(max_length=1, overflow=Overflow.DROP_HEAD))
    one_by_one = LengthLimit(QueueLimits(max_length=1, overflow=Overflow.DROP_HEAD))
    assert together.admit_all([3, 0, 9])
    for size in (3, 0, 9):
        assert one_by_one.admit(size, ready_count=5, ready_bytes=50) is Admission.ACCEPT
    assert ((together.pending_count, together.pending_bytes)
            == (one_by_one.pending_count, one_by_one.pending_bytes) == (3, 12))
    refusing = LengthLimit(QueueLimits(max_length=1, overflow=Overflow.REJECT_PUBLISH))
    assert not refusing.admit_all([1]) and refusing.pending_count == 0


def test_drop_head_is_over_only_past_its_limits() -> None:
    limit = LengthLimit(QueueLimits(max_length=2, max_length_bytes=100))
    assert limit.drops_per_message
    assert not limit.over(2, 100)
    assert limit.over(3, 30) and limit.over(1, 101)
    rejecting = LengthLimit(QueueLimits(max_length=2, overflow=Overflow.REJECT_PUBLISH))
    assert not rejecting.over(10, 1000) and not rejecting.drops_per_message
    assert not LengthLimit(QueueLimits()).drops_per_message
