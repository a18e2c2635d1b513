"""`LeaseDriver` over synchronous fake ports and a `ManualClock`: what it carries out."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from logbroker.cluster.lease_driver import LeaseDriver, LeasePorts
from logbroker.cluster.lease_keeper import LeaseKeeper, LeaseRaft
from segments.clock import ManualClock

VOTERS = frozenset({"a", "b", "c"})
FOLLOWER = LeaseRaft("b", False, 3, VOTERS)


@dataclass
class Ports:
    raft: LeaseRaft | None = FOLLOWER
    proofs: list[tuple[str, Callable[[bool], None]]] = field(default_factory=list)
    timers: list[tuple[int, Callable[[], None]]] = field(default_factory=list)
    restored: int = 0

    def ports(self) -> LeasePorts:
        return LeasePorts(lambda: self.raft, lambda leader, done: self.proofs.append(
            (leader, done)), self._call_at, self._restored)

    def _call_at(self, at_ms: int, action: Callable[[], None]) -> None:
        self.timers.append((at_ms, action))

    def _restored(self) -> None:
        self.restored += 1

    def fire(self, clock: ManualClock) -> None:
        at_ms, action = self.timers.pop(0)
        clock.advance(max(0, at_ms - clock.monotonic_ms()))
        action()


def driver(clock: ManualClock, ports: Ports) -> LeaseDriver:
    return LeaseDriver(LeaseKeeper("a", 1000, clock.monotonic_ms(), retry_ms=50),
                       ports.ports(), clock)


def test_a_lapsed_follower_asks_its_proof_on_the_timer_and_is_restored(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "logbroker.cluster.lease_driver")
    clock, fake = ManualClock(0), Ports()
    lease = driver(clock, fake)
    clock.advance(5000)  # a pause
    assert not lease.holds() and not lease.holds()
    assert sum("lease lapsed" in r.getMessage() for r in caplog.records) == 1
    assert [at for at, _ in fake.timers] == [5001] and fake.proofs == []  # one timer
    fake.fire(clock)
    assert [leader for leader, _ in fake.proofs] == ["b"]
    _, done = fake.proofs.pop()
    clock.advance(20)
    done(True)
    assert fake.restored == 1 and lease.holds()
    assert any("lease restored" in r.getMessage() for r in caplog.records)


def test_a_failed_proof_is_retried_on_a_timer() -> None:
    clock, fake = ManualClock(0), Ports()
    lease = driver(clock, fake)
    clock.advance(5000)
    lease.holds()
    fake.fire(clock)
    _, done = fake.proofs.pop()
    done(False)
    assert fake.restored == 0 and [at for at, _ in fake.timers] == [5051]
    fake.fire(clock)
    assert len(fake.proofs) == 1


def test_the_raft_leader_is_restored_by_a_voter_heard_after_the_margin() -> None:
    clock, fake = ManualClock(0), Ports(raft=LeaseRaft("a", True, 3, VOTERS))
    lease = driver(clock, fake)
    clock.advance(3000)
    assert not lease.holds() and fake.proofs == []
    clock.advance(250)
    lease.heard("b", 3)
    assert fake.restored == 1 and lease.holds()


def test_before_the_raft_exists_the_lease_is_only_read() -> None:
    clock, fake = ManualClock(0), Ports(raft=None)
    lease = driver(clock, fake)
    lease.heard("b", 3)
    clock.advance(2000)
    assert not lease.holds()
    assert fake.timers == [] and fake.proofs == []
