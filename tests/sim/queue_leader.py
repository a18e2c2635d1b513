"""`LeaderReplica`: a replicated queue's leader on one simulated node, as the shipped shell.

The leader is a `QueueShell` (logbroker/queue/queue_shell.py), opened as the
broker opens it (`QueueShell.open` with a `ReplicaSetup`: `open_queue_files`,
`open_gate`, the core recovered, the messages above the high watermark held),
here with small log segments, and run over `SimShellIO` (leader_ports.py):
its log and cursor writes stay unsynced until the simulation's `flush` (a
random later tick), so a crash in between loses them; its pump runs when
the call into it returns. Everything it decides is the shipped code: the
`AppendPipeline` (admission, readiness below the high watermark, confirms
once durable and passed by it, the gate's releases and fence), the
`SettleWriter` and retention, the pump and deliveries with the delivery
mark, the acks held while isolated and applied on rejoin, and `close`.

This adapter only connects the simulation to it: a publish becomes a
`Message` whose outcome goes to the simulated publisher (`PublishConfirm`),
a consumer client becomes a `DeliverySink` (`ClientSink`), and the
checker hears the offsets the high watermark passes (`committed`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from logbroker.message import Message, Properties
from logbroker.queue.consumers import Consumer
from logbroker.queue.queue_core import QueueCore
from logbroker.queue.queue_limits import Admission, QueueLimits
from logbroker.queue.queue_settings import QueueSettings
from logbroker.queue.queue_shell import QueueShell
from logbroker.queue.replica_setup import ReplicaSetup
from logbroker.queue.replication_gate import ReplicationGate
from logbroker.queue.retention import Retention
from segments.cursor_log import CursorLog
from segments.log import Log, LogConfig
from segments.memory_filesystem import MemoryFileSystem
from tests.sim.leader_ports import HooksClock, SimShellIO, run_now

VHOST = "/"
# Small segments, so retention deletes segments and followers fall below the log start:
# about 15 publishes each, as when the simulation wrote bare records (a publish's record
# now carries the broker's stored headers, 79 bytes a batch rather than 49). Smaller ones
# reset followers so often that few keep a divergent tail, which a mutation check needs.
QUEUE_LOG_CONFIG = LogConfig(segment_bytes_max=1240, index_interval_bytes=206)
RETAIN_NOTHING = Retention(retention_ms=None, retention_bytes=0)
PERSISTENT = Properties(delivery_mode=2)


class ConsumerSink(Protocol):
    """A consumer client: what the leader hands deliveries and cancellations to."""

    def deliver(self, shell: LeaderReplica, channel: str, offset: int, payload: bytes,
                redelivered: bool) -> None: ...

    def cancelled(self, shell: LeaderReplica) -> None: ...


class LeaderHooks(Protocol):
    """The simulation around a leader: its clock, timers, clients and checker."""

    @property
    def now_ms(self) -> int: ...

    def later(self, delay: int, action: Callable[[], None]) -> None: ...

    def confirm(self, queue: str, publish: int, ok: bool) -> None: ...

    def committed(self, queue: str, node: str, offset: int, payload: bytes) -> None: ...

    @property
    def stats(self) -> Counter[str]: ...


@dataclass(eq=False)
class PublishConfirm:
    """A simulated publisher's confirm as the pipeline's `Confirm`: the checker hears
    what the high watermark passed before the confirm goes out (whoever moved it)."""

    replica: LeaderReplica
    publish: int
    _done: bool = False

    def done(self) -> bool:
        return self._done

    def set_result(self, base_offset: int, /) -> None:
        self._done = True
        self.replica.report_committed()
        self.replica.hooks.confirm(self.replica.queue, self.publish, True)

    def set_exception(self, error: BaseException, /) -> None:
        self._done = True  # GateFenced, NotEnoughReplicas
        self.replica.hooks.confirm(self.replica.queue, self.publish, False)


@dataclass(eq=False)
class ClientSink:
    """A simulated consumer client as the shell's `DeliverySink` (no channel-wide limit)."""

    replica: LeaderReplica
    client: ConsumerSink
    channel_key: str

    def deliver(self, queue: str, consumer_tag: str | None, offset: int, redelivered: bool,
                message: Message) -> None:
        self.replica.report_committed()  # a delivery is below the high watermark
        self.client.deliver(self.replica, self.channel_key, offset, message.body, redelivered)

    def consumer_cancelled(self, queue: str, consumer_tag: str,
                           leader_moved: bool = False) -> None:
        self.client.cancelled(self.replica)

    def credit(self) -> int | None:
        return None


class LeaderReplica:
    def __init__(self, node: str, queue: str, fs: MemoryFileSystem, directory: str,
                 setup: ReplicaSetup, hooks: LeaderHooks) -> None:
        self.node = node
        self.queue = queue
        self.hooks = hooks
        self._payloads: dict[int, bytes] = {}
        self.io: SimShellIO | None = None
        settings = QueueSettings(VHOST, queue, durable=True, limits=QueueLimits(),
                                 retention=RETAIN_NOTHING)
        self.shell = QueueShell.open(settings, fs, directory, setup, HooksClock(hooks),
                                     self._io, QUEUE_LOG_CONFIG)
        gate = self.shell.replication
        assert gate is not None and self.io is not None
        self.gate: ReplicationGate = gate
        self._shell_rejoined: Callable[[], None] | None = gate.on_rejoin
        gate.on_rejoin = self._rejoined
        # Committed offsets given to the checker.
        self._reported: int = self.shell.log.log_start_offset
        self.report_committed()

    def _io(self, log: Log, cursor: CursorLog) -> SimShellIO:
        self.io = SimShellIO(log, cursor, self.hooks)
        return self.io

    @property
    def closed(self) -> bool:
        return self.shell.closed

    @property
    def log(self) -> Log:
        return self.shell.log

    @property
    def cursor(self) -> CursorLog:
        return self.shell.cursor

    @property
    def core(self) -> QueueCore:
        return self.shell.core

    @property
    def epoch(self) -> int:
        return self.gate.leader.epoch

    @property
    def held(self) -> int:
        """Messages written but not handed to the core yet (above the high watermark)."""
        return self.shell.held_messages

    @property
    def fenced(self) -> str | None:
        return self.gate.fenced

    @property
    def changes(self) -> int:
        """What wakes a long-polling fetch: how often the gate said it changed."""
        return self.gate.changes.notified

    def _settle(self) -> None:
        """After each call into the shell: what it scheduled runs, the checker hears."""
        assert self.io is not None
        self.io.run_ready()
        if not self.closed:
            self.report_committed()

    # ----------------------------------------------------------------- calls

    def publish(self, publish: int, payload: bytes) -> None:
        """`admit` + `append`, as a channel's publish does."""
        message = Message("", self.queue, payload, PERSISTENT, self.hooks.now_ms)
        if self.shell.admit(message) is not Admission.ACCEPT:
            self.hooks.confirm(self.queue, publish, False)
            return
        self.shell.append_confirming([message], PublishConfirm(self, publish))
        self._settle()

    def flush(self) -> None:
        """The simulation's random later tick: the shell's syncs land."""
        if self.closed:
            return
        assert self.io is not None
        self.io.flush()
        self._settle()

    def moved(self, change: Callable[[], object]) -> None:
        """`gate.moved` (a fetch, an in-sync commit): a release goes to the shell."""
        self.gate.moved(change)
        self._settle()

    def _rejoined(self) -> None:
        """`gate.on_rejoin`: the shell applies the acks it held while isolated."""
        held = self.shell.held_acks
        if self._shell_rejoined is not None:
            self._shell_rejoined()
        if held and not self.closed:
            self.hooks.stats["held_acks_applied"] += held
        self._settle()

    def add_consumer(self, tag: str, prefetch: int, sink: ConsumerSink) -> None:
        self.shell.add_consumer(Consumer(tag, tag, prefetch), ClientSink(self, sink, tag))
        self._settle()

    def channel_closed(self, tag: str) -> None:
        if not self.closed:
            self.shell.channel_closed(tag)
            self._settle()

    def ack(self, offsets: list[int]) -> None:
        self.shell.ack(offsets)
        self._settle()

    def close(self, reason: str) -> None:
        """`Broker.close_queue`: fence, cancel the consumers, close."""
        if self.closed:
            return
        self.gate.fence(reason)
        self.shell.cancel_consumers(leader_moved=True)
        run_now(self.shell.close())

    def crash(self) -> None:
        """The node lost power: nothing more happens here, nothing is synced."""
        assert self.io is not None
        self.io.stop()
        self.shell.closed = True
        self.shell.cancel_consumers()  # the client's connection broke

    # --------------------------------------------------------------- checker

    def report_committed(self) -> None:
        """Tell the checker the offsets the high watermark passed since the last time."""
        hw = self.gate.high_watermark
        start = max(self._reported, self.log.log_start_offset)
        if hw > start:
            for offset, value in enumerate(self._values(start, hw), start):
                self.hooks.committed(self.queue, self.node, offset, value)
        self._reported = max(self._reported, hw)

    def _values(self, offset: int, end: int) -> list[bytes]:
        """The records' values in [offset, end) (a leader's log never changes below its end)."""
        values: list[bytes] = []
        for at in range(offset, end):
            value = self._payloads.get(at)
            if value is None:
                self._payloads.update((r.offset, r.value) for r in self.log.read(at, 4096))
                value = self._payloads[at]
            values.append(value)
        return values
