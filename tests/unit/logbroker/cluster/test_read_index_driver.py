"""`ReadIndexDriver` over synchronous fake ports: asks the leader, hands the answer back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from logbroker.cluster.read_index import RaftPosition, ReadIndex
from logbroker.cluster.read_index_driver import ReadIndexDriver, ReadIndexPorts


@dataclass
class Ports:
    position: RaftPosition | None = None
    asked: list[tuple[str, Callable[[int | None], None]]] = field(default_factory=list)
    confirmed: int = 0

    def ports(self) -> ReadIndexPorts:
        return ReadIndexPorts(lambda: self.position,
                              lambda leader, answer: self.asked.append((leader, answer)),
                              self._confirmed)

    def _confirmed(self) -> None:
        self.confirmed += 1


def follower(leader: str | None, applied: int) -> RaftPosition:
    return RaftPosition(leader, False, False, 0, applied)


def test_a_follower_is_current_once_it_applied_what_the_leader_committed() -> None:
    fake = Ports(follower("b", 5))
    driver = ReadIndexDriver(ReadIndex(), fake.ports())
    assert not driver.current()
    driver.ask()
    driver.ask()  # one question at a time
    assert [leader for leader, _ in fake.asked] == ["b"]
    _, answer = fake.asked.pop()
    answer(8)
    assert fake.confirmed == 1 and not driver.current()  # applied 5 of 8
    fake.position = follower("b", 8)
    assert driver.current()


def test_a_lost_answer_is_asked_again_and_a_new_term_asks_the_new_leader() -> None:
    fake = Ports(follower("b", 5))
    driver = ReadIndexDriver(ReadIndex(), fake.ports())
    driver.ask()
    fake.asked.pop()[1](None)  # no answer came
    assert fake.confirmed == 0
    driver.ask()
    _, stale = fake.asked.pop()
    fake.position = follower("c", 5)
    driver.leader_changed()  # asks c at once
    assert [leader for leader, _ in fake.asked] == ["c"]
    stale(3)  # b's answer, from before the new term: counts for nothing
    assert fake.confirmed == 0 and not driver.current()
    fake.asked.pop()[1](5)
    assert fake.confirmed == 1 and driver.current()


def test_nothing_is_current_or_asked_before_the_raft_exists() -> None:
    fake = Ports(None)
    driver = ReadIndexDriver(ReadIndex(), fake.ports())
    driver.ask()
    assert not driver.current() and fake.asked == []
