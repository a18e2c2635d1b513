"""`RoleMovesDriver` over fake ports: steps carried out in order, answered at once or later."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from logbroker.metadata import (
    AddVhost,
    Command,
    DeclareQueue,
    ElectQueueLeader,
    MetadataState,
)
from logbroker.role_moves import Key, RoleMoves, StepFailed
from logbroker.role_moves_driver import Done, RoleMovesDriver
from replication.queue.epoch_history import EpochHistory
from replication.queue.replication_leader import ReplicationLeader
from segments.clock import ManualClock
from segments.memory_filesystem import MemoryFileSystem

KEY = ("/", "q")


class FakeGate:
    def __init__(self, epoch: int, members: tuple[str, ...]) -> None:
        self.leader = ReplicationLeader("n1", epoch, members, members, 0, 0, 0)
        self.changes = 0

    def moved(self, change: Callable[[], object]) -> object:
        self.changes += 1
        return change()


class FakeShell:
    replicated = True

    def __init__(self, epoch: int, members: tuple[str, ...]) -> None:
        self.gate: FakeGate | None = FakeGate(epoch, members)


class FakePorts:
    """Every step is written down; the waiting ones keep their `done` for the test."""

    def __init__(self, state: MetadataState) -> None:
        self._state = state
        self.is_current = True
        self.shells: dict[Key, FakeShell] = {}
        self.followed: set[Key] = set()
        self.fs = MemoryFileSystem()
        self.calls: list[str] = []
        self.waiting: list[Callable[[], None]] = []
        self.stale: str | None = None
        self.fail_open = False

    def current(self) -> bool:
        return self.is_current

    def state(self) -> MetadataState:
        return self._state

    def shell(self, key: Key) -> FakeShell | None:
        return self.shells.get(key)

    def led(self) -> Iterable[Key]:
        return list(self.shells)

    def following(self) -> set[Key]:
        return set(self.followed)

    def directory(self, key: Key) -> str:
        return f"/queues/{key[1]}"

    def open_leader(self, key: Key, high_watermark: int | None) -> str | None:
        self.calls.append(f"open hw={high_watermark}")
        if self.fail_open:
            raise OSError("no space")
        if self.stale is None:
            record = self._state.queue(*key)
            assert record is not None
            self.shells[key] = FakeShell(record.epoch, record.members)
        return self.stale

    def close_shell(self, key: Key, reason: str, done: Done) -> None:
        self.calls.append(f"close: {reason}")

        def closed() -> None:
            del self.shells[key]
            done(None)
        self.waiting.append(closed)

    def stop_following(self, key: Key, done: Callable[[int | StepFailed | None], None]
                       ) -> None:
        self.calls.append("stop")
        self.followed.discard(key)
        done(17)  # at once, from inside the effect

    def forget(self, key: Key, done: Done) -> None:
        self.calls.append("forget")
        self.followed.discard(key)
        done(None)

    def follow(self, key: Key) -> None:
        self.calls.append("follow")
        self.followed.add(key)

    def propose(self, command: Command, done: Done) -> None:
        self.calls.append(f"propose {type(command).__name__}")
        self.waiting.append(lambda: done(None))

    def answer(self) -> None:
        self.waiting.pop(0)()


def state_with(leader: str, epoch: int = 1, members: tuple[str, ...] = ("n1", "n2")
               ) -> MetadataState:
    state = MetadataState()
    state.apply(AddVhost("/"))
    state.apply(DeclareQueue("/", "q", durable=True, leader_node=leader, members=members))
    record = state.queue(*KEY)
    assert record is not None
    for number in range(1, epoch):
        current = state.queue(*KEY)
        assert current is not None
        state.apply(ElectQueueLeader("/", "q", number, leader, current.in_sync))
    return state


def driver_over(ports: FakePorts, node: str = "n1") -> tuple[RoleMovesDriver, list[Key]]:
    settled: list[Key] = []
    driver = RoleMovesDriver(RoleMoves(node), ports, ManualClock(), lambda level, text: None,
                             on_settled=settled.append)
    return driver, settled


def test_a_declared_queue_is_open_when_sync_returns() -> None:
    ports = FakePorts(state_with("n1"))
    driver, _ = driver_over(ports)
    driver.sync(KEY)
    assert ports.calls == ["open hw=None"] and KEY in ports.shells
    assert not driver.moving(KEY)


def test_a_member_follows() -> None:
    ports = FakePorts(state_with("n1"))
    driver, _ = driver_over(ports, "n2")
    driver.sync(KEY)
    assert ports.calls == ["follow"]


def test_a_promoted_follower_opens_from_its_high_watermark() -> None:
    ports = FakePorts(state_with("n1"))
    ports.followed.add(KEY)
    driver, _ = driver_over(ports)
    driver.sync(KEY)
    assert ports.calls == ["stop", "open hw=17"]


def test_a_close_that_waits_holds_the_move_until_it_is_done() -> None:
    ports = FakePorts(state_with("n1", epoch=2))
    ports.shells[KEY] = FakeShell(1, ("n1", "n2"))
    driver, settled = driver_over(ports)
    driver.sync(KEY)
    assert ports.calls == ["close: epoch 2 began"] and driver.moving(KEY)
    driver.sync(KEY)  # one move at a time
    assert ports.calls == ["close: epoch 2 began"]
    ports.answer()
    assert ports.calls == ["close: epoch 2 began", "open hw=None"]
    assert ports.shells[KEY].gate is not None and settled == [KEY]
    assert not driver.moving(KEY)


def test_a_copy_that_led_the_epoch_proposes_a_new_one() -> None:
    ports = FakePorts(state_with("n1"))
    history = EpochHistory()
    history.begin(1, 0)
    ports.fs.makedirs("/queues/q")
    history.save(ports.fs, "/queues/q")
    driver, settled = driver_over(ports)
    driver.sync(KEY)
    assert ports.calls == ["propose ElectQueueLeader"] and driver.moving(KEY)
    ports.answer()
    assert settled == [KEY] and not driver.moving(KEY)


def test_a_stale_open_waits_for_the_metadata_and_counts() -> None:
    ports = FakePorts(state_with("n1"))
    ports.stale = "this copy holds epoch 5"
    driver, _ = driver_over(ports)
    driver.sync(KEY)
    assert driver.stats["stale_epoch_opens"] == 1 and driver.stats["moves_deferred"] == 1
    ports.stale = None
    driver.catch_up()
    assert ports.calls == ["open hw=None", "open hw=None"] and KEY in ports.shells


def test_moves_wait_until_the_metadata_is_current() -> None:
    ports = FakePorts(state_with("n1"))
    ports.is_current = False
    driver, _ = driver_over(ports)
    driver.sync(KEY)
    driver.catch_up()
    assert ports.calls == [] and driver.stats["moves_deferred"] == 1
    ports.is_current = True
    driver.catch_up()
    assert ports.calls == ["open hw=None"]


def test_a_port_that_raises_fails_the_step_not_the_caller() -> None:
    ports = FakePorts(state_with("n1"))
    ports.fail_open = True
    notices: list[str] = []
    driver = RoleMovesDriver(RoleMoves("n1"), ports, ManualClock(),
                             lambda level, text: notices.append(text))
    driver.sync(KEY)
    assert not driver.moving(KEY) and any("no space" in text for text in notices)


def test_a_changed_replica_set_goes_to_the_gate() -> None:
    state = state_with("n1", members=("n1", "n2", "n3"))
    ports = FakePorts(state)
    shell = FakeShell(1, ("n1", "n2"))
    ports.shells[KEY] = shell
    driver, _ = driver_over(ports)
    driver.sync(KEY)
    assert shell.gate is not None and shell.gate.changes == 1
    assert shell.gate.leader.members == ("n1", "n2", "n3")


def test_sync_all_takes_every_queue_held_or_named_here() -> None:
    state = state_with("n2", members=("n2", "n1"))
    ports = FakePorts(state)
    ports.followed.add(("/", "gone"))
    driver, _ = driver_over(ports, "n3")
    driver.sync_all()
    assert ports.calls == ["forget"]  # n3 is no member of q: q is not its business


def test_after_stop_nothing_reaches_the_core() -> None:
    ports = FakePorts(state_with("n1", epoch=2))
    ports.shells[KEY] = FakeShell(1, ("n1", "n2"))
    driver, _ = driver_over(ports)
    driver.sync(KEY)
    driver.stop()
    ports.answer()
    assert ports.calls == ["close: epoch 2 began"]

