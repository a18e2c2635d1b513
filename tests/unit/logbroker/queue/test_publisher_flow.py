"""PublisherFlow: when a queue holds its publishers back, and when it stops trying."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from logbroker.queue.publisher_flow import FlowLimits, FlowMode, PublisherFlow

LIMITS = FlowLimits(high=200, low=100, stall_ms=20, hold_max_ms=500, trial_hold_max_ms=100,
                    open_min_ms=10, open_max_ms=250, trial_ms=100, gain=1.4, flow_ms=2_000,
                    cooldown_ms=3_000, cooldown_max_ms=30_000)


class Queue:
    """A queue's figures over time, driving one PublisherFlow."""

    def __init__(self, limits: FlowLimits = LIMITS) -> None:
        self.flow = PublisherFlow(limits)
        self.now_ms = 0
        self.ready = 0
        self.consumers = 1
        self.delivered = 0

    def publish(self, count: int) -> bool:
        self.ready += count
        return self.flow.should_hold(self.ready, self.consumers, self.delivered, self.now_ms)

    def run(self, ms: int, delivered: int) -> bool:
        """`ms` pass in which consumers take `delivered`; True if the hold ended."""
        self.now_ms += ms
        self.delivered += delivered
        self.ready -= delivered
        return self.flow.should_release(self.ready, self.consumers, self.delivered, self.now_ms)


def start_hold(queue: Queue) -> None:
    """A backlog forms, runs open for open_min_ms, and the next publish is held."""
    assert not queue.publish(300)  # first the consumers are measured with publishers running
    queue.run(10, 20)
    assert queue.publish(1)
    assert queue.flow.holding


def test_no_backlog_or_no_consumers_never_holds() -> None:
    queue = Queue()
    assert not queue.publish(150)
    queue.consumers = 0
    for _ in range(5):
        assert not queue.publish(1_000)
        queue.run(50, 0)
    assert queue.flow.holds == 0


def test_a_hold_ends_when_the_backlog_is_down_to_low() -> None:
    queue = Queue()
    start_hold(queue)
    assert queue.flow.should_hold(queue.ready, 1, queue.delivered, queue.now_ms)  # still held
    assert not queue.run(5, 100)
    assert queue.run(5, queue.ready - 100)
    assert not queue.flow.holding


def test_a_hold_ends_when_nothing_is_delivered_for_stall_ms() -> None:
    queue = Queue()
    start_hold(queue)
    assert not queue.run(19, 0)
    assert queue.flow.next_check_ms(queue.now_ms) == queue.now_ms + 1
    assert queue.run(1, 0)


def test_a_hold_ends_after_its_maximum_even_while_consumers_take_messages() -> None:
    queue = Queue()
    start_hold(queue)
    for _ in range(9):
        queue.ready += 1  # kept above low
        assert not queue.run(10, 1)
    queue.ready += 1
    assert queue.run(10, 1)  # 100 ms: a trial's maximum


def test_a_hold_ends_when_the_consumers_leave() -> None:
    queue = Queue()
    start_hold(queue)
    queue.consumers = 0
    assert queue.run(1, 0)


def test_a_trial_keeps_publishers_running_as_long_as_they_were_held() -> None:
    queue = Queue()
    start_hold(queue)
    queue.ready += 1_000
    assert queue.run(100, 5)  # held for the maximum
    queue.run(50, 5)
    assert not queue.publish(1)  # open 50 ms of the 100 the hold took
    queue.run(50, 5)
    assert queue.publish(1)


def trial(queue: Queue, held_per_10ms: int, open_per_10ms: int) -> None:
    """Alternate 50 ms open and 50 ms held phases until the trial judges."""
    queue.ready = 10_000  # a backlog all along: no hold ends on `low`
    while queue.flow.mode is FlowMode.TRIAL:
        if not queue.flow.holding:
            for _ in range(5):
                queue.run(10, open_per_10ms)
            queue.ready += 5 * open_per_10ms
            assert queue.publish(0)
        for _ in range(5):
            queue.run(10, held_per_10ms)
        queue.ready += 5 * held_per_10ms
        if queue.flow.holding:  # 50 ms: end it the way a low backlog would
            queue.ready, saved = 0, queue.ready
            queue.run(0, 0)
            queue.ready = saved


def test_holding_that_speeds_up_consumers_goes_on_in_flow_mode() -> None:
    queue = Queue()
    assert not queue.publish(300)
    trial(queue, held_per_10ms=150, open_per_10ms=50)
    assert queue.flow.mode is FlowMode.FLOW
    queue.ready = 300
    queue.run(10, 0)
    assert queue.publish(0)  # holding again, with no trial balance to keep
    assert queue.flow.cooldowns == 0


def test_holding_that_does_not_speed_up_consumers_stops_for_the_cooldown() -> None:
    queue = Queue()
    assert not queue.publish(300)
    trial(queue, held_per_10ms=20, open_per_10ms=20)
    assert queue.flow.mode is FlowMode.COOLDOWN
    assert queue.flow.cooldowns == 1
    holds = queue.flow.holds
    for _ in range(29):  # 2.9 s of cooldown: publishers are never held
        queue.run(100, 0)
        assert not queue.publish(100)
    assert queue.flow.holds == holds
    queue.run(100, 0)
    assert not queue.publish(1)  # a new trial begins, measuring open first
    assert queue.flow.mode is FlowMode.TRIAL
    queue.run(10, 0)
    assert queue.publish(1)


def test_flow_mode_is_tried_again_after_flow_ms() -> None:
    queue = Queue()
    assert not queue.publish(300)
    trial(queue, held_per_10ms=150, open_per_10ms=50)
    queue.run(2_000, 0)
    queue.ready = 300
    queue.publish(0)
    assert queue.flow.mode is FlowMode.TRIAL


def test_consumers_running_dry_restart_a_trial() -> None:
    queue = Queue()
    start_hold(queue)
    queue.run(20, queue.ready)  # everything taken: the hold ends
    assert not queue.publish(0)  # ready == 0
    assert not queue.publish(300)  # a backlog again: measured open first
    queue.run(10, 0)
    assert queue.publish(0)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 400), st.integers(0, 60),
                          st.integers(0, 2)), max_size=200))
def test_holds_always_end_by_their_maximum(steps: list[tuple[int, int, int, int]]) -> None:
    queue = Queue()
    hold_started: int | None = None
    for action, amount, ms, consumers in steps:
        queue.consumers = consumers
        if action == 0:
            held = queue.publish(amount)
            if held and hold_started is None:
                hold_started = queue.now_ms
            if consumers == 0 and hold_started is None:
                assert not held
        else:
            taken = min(queue.ready, amount)
            released = queue.run(ms, taken)
            if queue.flow.holding:
                assert hold_started is not None
                check = queue.flow.next_check_ms(queue.now_ms)
                assert check is not None and check <= hold_started + LIMITS.hold_max_ms
            elif released:
                hold_started = None


def _cooldown_length(queue: Queue) -> int:
    """Run a cooled-down queue (with its backlog) until a publish starts a new trial."""
    started = queue.now_ms
    while queue.flow.mode is not FlowMode.TRIAL:
        queue.run(100, 0)
        queue.publish(0)
    return queue.now_ms - started


def test_cooldowns_double_while_holding_keeps_not_helping_and_reset_when_it_helps() -> None:
    queue = Queue(replace(LIMITS, cooldown_max_ms=12_000))
    assert not queue.publish(300)
    lengths = []
    for _ in range(4):
        trial(queue, held_per_10ms=20, open_per_10ms=20)
        assert queue.flow.mode is FlowMode.COOLDOWN
        lengths.append(_cooldown_length(queue))
    assert lengths == [3_000, 6_000, 12_000, 12_000]
    trial(queue, held_per_10ms=150, open_per_10ms=50)
    assert queue.flow.mode is FlowMode.FLOW
    queue.run(2_000, 0)
    queue.publish(0)  # flow_ms is over: a new trial, measuring afresh (publishers were idle)
    assert queue.flow.mode is FlowMode.TRIAL and not queue.flow.holding
    trial(queue, held_per_10ms=20, open_per_10ms=20)
    assert _cooldown_length(queue) == 3_000


def test_an_open_phase_without_publishes_is_measured_anew() -> None:
    queue = Queue()
    assert not queue.publish(300)  # measuring open from here
    queue.run(300, 0)  # idle publishers; consumers take nothing (they may have run dry)
    assert not queue.publish(0)  # too long ago to tell anything: measured afresh
    queue.run(10, 20)
    assert queue.publish(0)


def trial_with_publishes(queue: Queue, held_per_10ms: int, open_per_10ms: int,
                         published_per_10ms: int) -> None:
    """100 ms open (publishers adding `published_per_10ms`), then a hold that ends on
    the trial's maximum, until the trial judges."""
    queue.ready = 10_000
    assert not queue.publish(0)  # a backlog: measuring open from here
    while queue.flow.mode is FlowMode.TRIAL:
        for _ in range(10):
            queue.ready += published_per_10ms
            queue.run(10, open_per_10ms)
        assert queue.publish(0)
        for _ in range(10):
            queue.run(10, held_per_10ms)
        assert not queue.flow.holding  # 100 ms: the trial's maximum hold


def test_a_smaller_gain_is_enough_when_publishers_ran_close_to_the_held_rate() -> None:
    # A saturated broker on a fast loop: holding gains 1.25x, and the publishers ran
    # only 1.2x as fast as the consumers take messages while held.
    queue = Queue()
    trial_with_publishes(queue, held_per_10ms=25, open_per_10ms=20, published_per_10ms=30)
    assert queue.flow.mode is FlowMode.FLOW


def test_a_smaller_gain_is_not_enough_when_publishers_ran_far_ahead() -> None:
    # A consumer application at its own pace, sharing the CPU: the same 1.25x gain, but
    # its publishers ran 4x as fast as it takes messages even while they are held.
    queue = Queue()
    trial_with_publishes(queue, held_per_10ms=25, open_per_10ms=20, published_per_10ms=100)
    assert queue.flow.mode is FlowMode.COOLDOWN


def test_below_the_close_gain_publishers_close_behind_are_not_held() -> None:
    queue = Queue()
    trial_with_publishes(queue, held_per_10ms=22, open_per_10ms=20, published_per_10ms=22)
    assert queue.flow.mode is FlowMode.COOLDOWN


def test_a_shrinking_backlog_counts_as_nothing_published() -> None:
    # Open phases in which the consumers take more than arrives: the published count
    # never goes negative, so the ratio stays defined (and close).
    queue = Queue()
    trial_with_publishes(queue, held_per_10ms=25, open_per_10ms=20, published_per_10ms=0)
    assert queue.flow.mode is FlowMode.FLOW
