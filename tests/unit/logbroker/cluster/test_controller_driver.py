"""The controller driver over fake ports and a ManualClock: effects out, answers back in."""

from collections.abc import Callable
from dataclasses import dataclass, field

from logbroker.cluster.controller import Controller, ControllerConfig
from logbroker.cluster.controller_driver import ControllerDriver, Done
from logbroker.cluster.liveness import NodeAddress
from logbroker.metadata import Command, ElectQueueLeader, MetadataState, SetNodeLiveness
from replication.queue.failover import ReplicaStatus
from segments.clock import ManualClock
from tests.unit.logbroker.cluster.test_controller import MEMBERS, address, cluster


@dataclass
class FakePorts:
    state: MetadataState
    leading_now: bool = True
    proposed: list[tuple[Command, Done]] = field(default_factory=list)
    asked: list[tuple[str, Callable[[ReplicaStatus | None], None]]] = field(
        default_factory=list)
    timers_at: list[tuple[int, Callable[[], None]]] = field(default_factory=list)

    # Proposer
    def propose(self, command: Command, on_done: Done) -> None:
        self.proposed.append((command, on_done))

    # StatusAsker: this node's own copy answers at once, as the real port does
    def ask_status(self, member: str, vhost: str, queue: str, timeout_ms: int,
                   on_answer: Callable[[ReplicaStatus | None], None]) -> None:
        if member == "a":
            on_answer(ReplicaStatus("a", 7, 1, 0))
        else:
            self.asked.append((member, on_answer))

    # Handovers
    def sync(self, vhost: str, queue: str, on_done: Done) -> None:
        on_done(None)

    def transfer(self, vhost: str, queue: str, target: str | None, on_done: Done) -> None:
        on_done(None)

    # Timers
    def call_at(self, monotonic_ms: int, action: Callable[[], None]) -> None:
        self.timers_at.append((monotonic_ms, action))


class Ports:
    def __init__(self, fake: FakePorts) -> None:
        self.fake = fake
        self.metadata = View(fake)
        self.proposer = self.status = self.handovers = self.timers = fake
        self.heartbeats = Heartbeats()


class Heartbeats:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, leader: str, address: NodeAddress) -> None:
        self.sent.append(leader)


class View:
    def __init__(self, fake: FakePorts) -> None:
        self._fake = fake

    def leading(self) -> bool:
        return self._fake.leading_now

    def leader(self) -> str | None:
        return "a" if self._fake.leading_now else "b"

    def members(self) -> frozenset[str]:
        return MEMBERS

    def state(self) -> MetadataState:
        return self._fake.state

    def applied_index(self) -> int:
        return 1


def driver(state: MetadataState) -> tuple[ControllerDriver, FakePorts, ManualClock,
                                          list[str]]:
    """A controller that took over, then heard only c for a session timeout."""
    fake, clock, notices = FakePorts(state), ManualClock(10_000), []
    core = Controller(ControllerConfig("a", 600, 500, 1000, 20))
    run = ControllerDriver(core, Ports(fake), clock, lambda level, text: notices.append(text))
    run.took_over(frozenset())
    clock.advance(600)
    run.heard(address("c"))
    return run, fake, clock, notices


def test_an_answer_given_at_once_is_taken_after_the_current_effects() -> None:
    run, fake, _, notices = driver(cluster("b"))
    run.beat(address("a"))
    [(member, answer)] = fake.asked
    assert member == "c" and fake.proposed == []
    answer(ReplicaStatus("c", 3, 1, 0))
    [(command, done)] = fake.proposed
    assert command == ElectQueueLeader("/", "q", 1, "a", ("a", "c"), out_of_sync=False)
    done(None)
    assert run.core.failover.elections == 1
    assert any("a elected for epoch 2" in text for text in notices)


def test_a_timer_the_core_asks_for_calls_its_tick() -> None:
    run, fake, clock, _ = driver(cluster())
    run.link_lost("c")
    [(at, fire)] = fake.timers_at
    assert at == clock.monotonic_ms() + 520
    clock.advance(520)
    fire()
    assert [command for command, _ in fake.proposed] == [
        SetNodeLiveness("b", False, clock.wall_ms()), SetNodeLiveness("c", False, clock.wall_ms())]


def test_nothing_reaches_a_stopped_driver() -> None:
    run, fake, _, _ = driver(cluster("b"))
    run.beat(address("a"))
    [(_, answer)] = fake.asked
    run.stop()
    answer(ReplicaStatus("c", 3, 1, 0))
    run.beat(address("a"))
    assert fake.proposed == []
