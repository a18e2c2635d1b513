"""HeldMessages: written messages enter the core in offset order, never at or past the limit."""

from logbroker.queue.consumers import Consumer
from logbroker.queue.effects import Deliver, Settle
from logbroker.queue.held_messages import HeldMessages
from logbroker.queue.message_meta import MessageMeta, MetaRun
from logbroker.queue.queue_core import QueueCore
from logbroker.queue.queue_limits import QueueLimits


def run(*sizes: int) -> MetaRun:
    return MetaRun.of([MessageMeta(size) for size in sizes])


def test_a_write_where_the_core_expects_it_goes_straight_in() -> None:
    core, held = QueueCore(QueueLimits()), HeldMessages()
    assert held.written(core, 0, run(1, 2, 3), limit=None) == (3, [])
    assert core.next_offset == 3 and len(held) == 0


def test_messages_wait_for_the_limit_and_enter_in_offset_order() -> None:
    core, held = QueueCore(QueueLimits()), HeldMessages()
    assert held.written(core, 2, run(5), limit=None) == (0, [])  # 0 and 1 not written yet
    assert held.written(core, 0, run(1, 1), limit=2) == (2, [])  # 2 is at the limit
    assert (core.next_offset, len(held)) == (2, 1)
    assert held.release(core, 2) == (0, [])
    assert held.release(core, 3) == (1, [])
    assert (core.next_offset, len(held), core.ready_bytes) == (3, 0, 7)


def test_what_a_predecessor_may_have_delivered_enters_flagged() -> None:
    core = QueueCore(QueueLimits())
    held = HeldMessages({0: MessageMeta(1), 1: MessageMeta(1), 2: MessageMeta(1)},
                        delivered_below=2)
    assert held.release(core, 10)[0] == 3
    core.add_consumer(Consumer("c", "ch"), now_ms=0)
    assert [(e.offset, e.redelivered) for e in core.pump(0) if isinstance(e, Deliver)] == [
        (0, True), (1, True), (2, False)]


def test_drop_head_effects_come_back_in_order() -> None:
    core, held = QueueCore(QueueLimits(max_length=1)), HeldMessages()
    held.hold(0, run(1, 1, 1))
    count, effects = held.release(core, None)
    assert count == 3 and core.message_count == 1
    assert [(e.lo, e.hi) for e in effects if isinstance(e, Settle)] == [(0, 1), (1, 2)]
