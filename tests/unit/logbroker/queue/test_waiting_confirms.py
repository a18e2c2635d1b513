"""WaitingConfirms: publishes leave in offset order, once the high watermark passes them."""

from logbroker.queue.waiting_confirms import WaitingConfirms


def test_publishes_leave_in_order_once_passed() -> None:
    waiting: WaitingConfirms[str] = WaitingConfirms()
    waiting.add(2, "a")  # offsets 0 and 1
    waiting.add(3, "b")
    waiting.add(5, "c")
    assert waiting.passed(1) == []
    assert waiting.passed(3) == ["a", "b"]
    assert waiting.passed(3) == [] and len(waiting) == 1
    assert waiting.take_all() == ["c"] and len(waiting) == 0


def test_a_publish_durable_early_waits_behind_the_ones_added_before_it() -> None:
    """A transient write (offset 2) is durable once written, before the persistent one
    before it (offsets 0-1) has its fsync: confirms keep the order they came in."""
    waiting: WaitingConfirms[str] = WaitingConfirms()
    waiting.add(3, "transient")
    waiting.add(2, "persistent")
    assert waiting.passed(2) == []
    assert waiting.passed(3) == ["transient", "persistent"]
