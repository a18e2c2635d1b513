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


def test_stop_signals_the_running_then_kills_the_late_and_exits_once() -> None:
    core = WorkerRestarts(3, POLICY)
    core.begin(0)
    core.exited(3, 1, 10)  # waiting for its restart: not signalled, never restarted
    assert core.stop(20) == [Signal((1, 2), kill=False)]
    assert core.stop(21) == []
    assert core.tick(200) == []
    assert core.exited(1, 0, 300) == []
    assert core.next_deadline_ms() == 5020
    assert core.tick(5020) == [Signal((2,), kill=True)]
    assert core.tick(6000) == []
    assert core.exited(2, -9, 6001) == [Exit(1)]


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
