"""A queue leader's node that lost the controller isolates its gates, and rejoins."""

from dataclasses import dataclass

from logbroker.cluster.isolation import REASON, Isolation


@dataclass
class FakeGate:
    isolated: str | None = None
    rejoined: int = 0

    def isolate(self, reason: str) -> None:
        self.isolated = reason

    def rejoin(self) -> None:
        self.isolated = None
        self.rejoined += 1


def test_silence_past_the_session_timeout_isolates_each_gate_once() -> None:
    isolation, gate = Isolation(600, 0), FakeGate()
    assert isolation.check([("q", gate)], 600, leading=False) == []
    assert isolation.check([("q", gate)], 601, leading=False) == [("q", True)]
    assert gate.isolated == REASON
    assert isolation.check([("q", gate)], 700, leading=False) == []


def test_hearing_the_leader_again_rejoins() -> None:
    isolation, gate = Isolation(600, 0), FakeGate()
    isolation.check([("q", gate)], 1000, leading=False)
    isolation.heard(1000)
    assert isolation.check([("q", gate)], 1001, leading=False) == [("q", False)]
    assert gate.isolated is None and gate.rejoined == 1


def test_the_raft_leader_is_never_isolated() -> None:
    isolation, gate = Isolation(600, 0), FakeGate()
    assert isolation.check([("q", gate)], 10_000, leading=True) == []
    assert not isolation.lost(10_000, leading=True)
