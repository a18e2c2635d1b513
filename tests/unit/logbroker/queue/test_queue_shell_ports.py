"""`QueueShell` over synchronous ports (`ShellIO`): the simulation's `SimShellIO`, a
`ManualClock`, no event loop. Writes stay unsynced until `flush`; the pump runs
at `run_ready`, as asyncio would run it after the current callback."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pamqp import commands

from logbroker.message import Message
from logbroker.queue.consumers import Consumer
from logbroker.queue.queue_limits import Admission, QueueLimits
from logbroker.queue.queue_shell import QueueSettings, QueueShell
from logbroker.queue.replica_setup import ReplicaSetup
from logbroker.queue.replication_gate import GateFenced, ReplicationGate
from segments.clock import ManualClock
from segments.cursor_log import CursorLog
from segments.log import Log
from segments.memory_filesystem import MemoryFileSystem
from tests.sim.leader_ports import SimShellIO, run_now

SETTINGS = QueueSettings(vhost="/", name="q", durable=True, limits=QueueLimits())
MEMBERS = ("n1", "n2", "n3")


@dataclass
class Timers:
    due: list[tuple[int, Callable[[], None]]] = field(default_factory=list)

    def later(self, delay: int, action: Callable[[], None]) -> None:
        self.due.append((delay, action))


@dataclass
class Outcome:
    """A publish's `Confirm`."""

    result: int | BaseException | None = None

    def done(self) -> bool:
        return self.result is not None

    def set_result(self, base_offset: int, /) -> None:
        self.result = base_offset

    def set_exception(self, error: BaseException, /) -> None:
        self.result = error


@dataclass
class Sink:
    channel_key: str = "ch"
    got: list[tuple[int, bytes]] = field(default_factory=list)
    cancelled: bool = False

    def deliver(self, queue: str, consumer_tag: str | None, offset: int, redelivered: bool,
                message: Message) -> None:
        self.got.append((offset, message.body))

    def consumer_cancelled(self, queue: str, consumer_tag: str,
                           leader_moved: bool = False) -> None:
        self.cancelled = True

    def credit(self) -> int | None:
        return None


class Opened:
    def __init__(self, replica: ReplicaSetup | None) -> None:
        self.io: SimShellIO | None = None
        self.shell = QueueShell.open(SETTINGS, MemoryFileSystem(), "/q", replica,
                                     ManualClock(), self._io)
        self.sink = Sink()
        self.shell.add_consumer(Consumer("c", "ch", 0), self.sink)

    def _io(self, log: Log, cursor: CursorLog) -> SimShellIO:
        self.io = SimShellIO(log, cursor, Timers())
        return self.io

    def publish(self, count: int) -> list[Outcome]:
        outcomes = []
        for index in range(count):
            message = Message("", "q", f"m{index}".encode(),
                              commands.Basic.Properties(delivery_mode=2))
            assert self.shell.admit(message) is Admission.ACCEPT
            outcomes.append(Outcome())
            self.shell.append_confirming([message], outcomes[-1])
        self.run_ready()
        return outcomes

    def run_ready(self) -> None:
        assert self.io is not None
        self.io.run_ready()

    def flush(self) -> None:
        assert self.io is not None
        self.io.flush()
        self.run_ready()

    @property
    def gate(self) -> ReplicationGate:
        gate = self.shell.replication
        assert gate is not None
        return gate

    def fetch(self, follower: str, next_offset: int) -> None:
        leader = self.gate.leader
        self.gate.moved(lambda: leader.on_fetch(follower, leader.epoch, next_offset,
                                                leader.epoch, self.gate.history, 0, 0))
        self.run_ready()


def test_a_single_node_delivers_once_written_and_confirms_once_synced() -> None:
    queue = Opened(None)
    outcomes = queue.publish(2)
    assert queue.sink.got == [(0, b"m0"), (1, b"m1")]
    assert [o.result for o in outcomes] == [None, None]  # written, not synced
    queue.flush()
    assert [o.result for o in outcomes] == [0, 1]


def test_a_leader_confirms_only_once_synced_and_passed_by_the_high_watermark() -> None:
    queue = Opened(ReplicaSetup("n1", 1, MEMBERS, MEMBERS))
    outcomes = queue.publish(2)
    for follower in MEMBERS[1:]:
        queue.fetch(follower, 2)
    assert queue.sink.got == [] and not any(o.done() for o in outcomes)  # not synced here
    queue.flush()
    assert [o.result for o in outcomes] == [0, 1]
    assert queue.sink.got == [(0, b"m0"), (1, b"m1")]


def test_an_isolated_leader_delivers_nothing_and_the_rejoin_pumps_what_waited() -> None:
    queue = Opened(ReplicaSetup("n1", 1, MEMBERS, MEMBERS))
    queue.publish(1)
    queue.flush()
    queue.gate.isolate("the node lost the controller")
    for follower in MEMBERS[1:]:
        queue.fetch(follower, 1)
    assert queue.sink.got == []  # maybe replaced: a delivery could repeat the new leader's
    queue.gate.rejoin()
    queue.run_ready()
    assert queue.sink.got == [(0, b"m0")]


def test_closing_a_fenced_leader_nacks_what_it_had_not_confirmed() -> None:
    queue = Opened(ReplicaSetup("n1", 1, MEMBERS, MEMBERS))
    synced = queue.publish(1)
    queue.flush()
    unsynced = queue.publish(1)
    queue.gate.fence("epoch 2 began")
    queue.shell.cancel_consumers(leader_moved=True)
    run_now(queue.shell.close())
    assert queue.sink.cancelled and queue.shell.closed
    assert isinstance(synced[0].result, GateFenced) and isinstance(unsynced[0].result,
                                                                   GateFenced)
