"""When the supervisor starts, restarts and stops its workers (WorkerRestarts, pure)."""

from __future__ import annotations

from logbroker.worker_restarts import (
    USAGE,
    Exit,
    RestartPolicy,
    Signal,
    Start,
    WorkerRestarts,
)

POLICY = RestartPolicy(base_ms=100, max_ms=1000, stable_ms=10_000, stop_timeout_ms=5000)


def test_every_worker_starts_and_a_dead_one_comes_back_after_a_growing_backoff() -> None:
    core = WorkerRestarts(2, POLICY)
    assert core.begin(0) == [Start(1), Start(2)]
    assert core.exited(2, -9, 50) == []
    assert core.next_deadline_ms() == 150
    assert core.tick(149) == []
    assert core.tick(150) == [Start(2)]
    assert core.exited(2, 1, 160) == []  # crashed again at once: 200 ms
    assert core.next_deadline_ms() == 360
    now = 1000
    for _ in range(10):  # bounded by max_ms
        assert core.tick(now) == [Start(2)]
        core.exited(2, 1, now)
        now += 1000
    assert core.next_deadline_ms() == now - 1000 + 1000
    assert core.restarts == 11


def test_a_worker_that_ran_long_comes_back_at_once() -> None:
    core = WorkerRestarts(1, POLICY)
    core.begin(0)
    core.exited(1, 1, 10)
    core.tick(110)
    core.exited(1, 1, 20_000)  # ran 19.9 s, more than stable_ms
    assert core.next_deadline_ms() == 20_100


def test_stop_signals_the_running_one_at_a_time_then_kills_the_late_and_exits_once(
        ) -> None:
    core = WorkerRestarts(3, POLICY)  # a step of 5000 // 3 = 1666 ms
    core.begin(0)
    core.exited(3, 1, 10)  # waiting for its restart: not signalled, never restarted
    assert core.stop(20) == [Signal((2,), kill=False)]  # the highest running first
    assert core.stop(21) == []
    assert core.signalled(2) and not core.signalled(1)
    assert core.next_deadline_ms() == 20 + 1666
    assert core.tick(200) == []
    assert core.tick(1686) == [Signal((1,), kill=False)]  # 2 is late: 1 goes on anyway
    assert core.exited(1, 0, 1700) == []
    assert core.next_deadline_ms() == 5020
    assert core.tick(5020) == [Signal((2,), kill=True)]
    assert core.tick(6000) == []
    assert core.exited(2, -9, 6001) == [Exit(1)]


def test_the_next_worker_stops_as_soon_as_the_one_before_exited() -> None:
    core = WorkerRestarts(4, POLICY)
    core.begin(0)
    assert core.stop(100) == [Signal((4,), kill=False)]
    assert core.exited(2, 0, 110) == []  # stopped by itself meanwhile: skipped later
    assert core.exited(4, 0, 150) == [Signal((3,), kill=False)]
    assert core.exited(3, 0, 170) == [Signal((1,), kill=False)]
    assert core.next_deadline_ms() == 5100  # the last one has the rest of the stop
    assert core.exited(1, 0, 180) == [Exit(0)]
    assert core.next_deadline_ms() is None


def test_every_worker_had_sigterm_one_step_before_the_kill() -> None:
    core = WorkerRestarts(3, POLICY)
    core.begin(0)
    signals = core.stop(0)
    now = 0
    while (deadline := core.next_deadline_ms()) is not None and deadline < 5000:
        now = deadline
        signals += core.tick(now)
    assert signals == [Signal((3,), kill=False), Signal((2,), kill=False),
                       Signal((1,), kill=False)]
    assert now <= 5000 - 5000 // 3
    assert core.tick(5000) == [Signal((1, 2, 3), kill=True)]


def test_a_clean_stop_exits_zero_and_no_worker_running_exits_at_once() -> None:
    core = WorkerRestarts(2, POLICY)
    core.begin(0)
    core.stop(1)
    assert core.exited(1, 0, 2) == []
    assert core.exited(2, 0, 3) == [Exit(0)]
    idle = WorkerRestarts(1, POLICY)
    idle.begin(0)
    idle.exited(1, 1, 1)
    assert idle.stop(2) == [Exit(0)]


def test_bad_settings_stop_the_node() -> None:
    core = WorkerRestarts(2, POLICY)
    core.begin(0)
    assert core.exited(1, USAGE, 5) == [Signal((2,), kill=False)]
    assert core.exited(2, 0, 6) == [Exit(1)]
