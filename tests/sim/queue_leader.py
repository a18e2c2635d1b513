"""`LeaderReplica`: a replicated queue's leader on one simulated node.

It opens the queue as the real shell does, with the real code: `QueueShell.open`
is `queue_opening.open_queue_files` with a `ReplicaSetup` (the log, cursor log
and delivery mark on the node's file system, `open_gate`, the `QueueCore`
recovered with what may have been delivered flagged, the messages above the
high watermark held, and flagged too when released if they may have been
delivered), here with small log segments. The write path is the shipped
one: the `AppendPipeline` admits and appends publishes, makes them ready
below the high watermark (`HeldMessages`) and confirms them once durable and
passed by it (`WaitingConfirms`), applying the `ReplicationGate`'s releases
(the gate's listener) and fences; the `SettleWriter` writes settles to the
cursor log, reports them (`acks_grew`) and reclaims settled segments. They
run over the simulated ports of leader_ports.py: the log's and the cursor's
writes stay unsynced until the simulation's `flush` (a random later tick),
so a crash in between loses them.

What is left here mirrors the rest of `QueueShell`, synchronously: the
consumers, the pump and the deliveries, the acks held while isolated
(`HeldAcks`, applied on rejoin), what a settled floor does to the core, and
closing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from logbroker.message import Message, Properties
from logbroker.queue.append_pipeline import AppendPipeline
from logbroker.queue.consumers import Consumer
from logbroker.queue.effects import Deliver, Effect, Settle
from logbroker.queue.held_acks import HeldAcks
from logbroker.queue.held_messages import HeldMessages
from logbroker.queue.queue_limits import Admission, QueueLimits
from logbroker.queue.queue_opening import open_queue_files
from logbroker.queue.queue_settings import QueueSettings
from logbroker.queue.record_cache import RecordCache
from logbroker.queue.replica_setup import ReplicaSetup
from logbroker.queue.replication_gate import GateFenced
from logbroker.queue.retention import Retention
from logbroker.queue.settle_writer import SettleWriter
from segments.log import AppendResult, LogConfig
from segments.memory_filesystem import MemoryFileSystem
from segments.record_batch import Record
from tests.sim.leader_ports import HooksClock, SimCommitter, SimGather, SimReclaimer

VHOST = "/"
# Small segments, so retention deletes segments and followers fall below the log start.
QUEUE_LOG_CONFIG = LogConfig(segment_bytes_max=768, index_interval_bytes=128)
RETAIN_NOTHING = Retention(retention_ms=None, retention_bytes=0)
PERSISTENT = Properties(delivery_mode=2)


class ConsumerSink(Protocol):
    """A consumer client: what the leader hands deliveries and cancellations to."""

    def deliver(self, shell: LeaderReplica, channel: str, offset: int, payload: bytes,
                redelivered: bool) -> None: ...

    def cancelled(self, shell: LeaderReplica) -> None: ...


class LeaderHooks(Protocol):
    """The simulation around a leader: its clock, its clients and its checker."""

    @property
    def now_ms(self) -> int: ...

    def confirm(self, queue: str, publish: int, ok: bool) -> None: ...

    def committed(self, queue: str, node: str, offset: int, payload: bytes) -> None: ...

    @property
    def stats(self) -> Counter[str]: ...


@dataclass(eq=False)
class PublishConfirm:
    """A simulated publisher's confirm as the pipeline's `Confirm`."""

    hooks: LeaderHooks
    queue: str
    publish: int
    _done: bool = False

    def done(self) -> bool:
        return self._done

    def set_result(self, base_offset: int, /) -> None:
        self._done = True
        self.hooks.confirm(self.queue, self.publish, True)

    def set_exception(self, error: BaseException, /) -> None:
        self._done = True
        self.hooks.confirm(self.queue, self.publish, False)  # GateFenced, NotEnoughReplicas


class LeaderReplica:
    def __init__(self, node: str, queue: str, fs: MemoryFileSystem, directory: str,
                 setup: ReplicaSetup, hooks: LeaderHooks) -> None:
        self.node = node
        self.queue = queue
        self.hooks = hooks
        self.closed = False
        self._payloads: dict[int, bytes] = {}
        settings = QueueSettings(VHOST, queue, durable=True, limits=QueueLimits())
        opened = open_queue_files(settings, fs, directory, setup, hooks.now_ms,
                                  QUEUE_LOG_CONFIG)
        assert opened.gate is not None
        self.log, self.cursor, self.mark = opened.log, opened.cursor, opened.mark
        self.core, self.gate = opened.core, opened.gate
        clock = HooksClock(hooks)
        self._log_commits: SimCommitter[Sequence[Record], AppendResult] = SimCommitter(self.log)
        self._cursor_commits: SimCommitter[Sequence[tuple[int, int]], None] = (
            SimCommitter(self.cursor))
        self._gather = SimGather()
        self._records = RecordCache(self.log)
        self._held = HeldMessages(opened.held, opened.held_delivered_below)
        self.pipeline = AppendPipeline(lambda: settings, self.core, self._log_commits,
                                       self._records, self._held, clock, self._made_ready)
        self.pipeline.replicate(self.gate)
        self.settler = SettleWriter(self.log, self.cursor, self._cursor_commits, self._gather,
                                    SimReclaimer(self.log), lambda: RETAIN_NOTHING,
                                    self._settled, clock)
        self._sinks: dict[str, ConsumerSink] = {}
        self._held_acks = HeldAcks()  # acks taken while cut off from the controller
        self._reported = self.log.log_start_offset  # committed offsets given to the checker
        self.gate.on_rejoin = self._apply_held_acks
        self._report_committed()

    @property
    def epoch(self) -> int:
        return self.gate.leader.epoch

    @property
    def held(self) -> int:
        """Messages written but not handed to the core yet (above the high watermark)."""
        return len(self._held)

    @property
    def fenced(self) -> str | None:
        return self.gate.fenced

    @property
    def changes(self) -> int:
        """What wakes a long-polling fetch: how often the gate said it changed."""
        return self.gate.changes.notified

    def _values(self, offset: int, end: int | None = None) -> list[bytes]:
        """The records' values in [offset, end) (a leader's log never changes below its end)."""
        end = self.log.next_offset if end is None else end
        values: list[bytes] = []
        for at in range(offset, end):
            value = self._payloads.get(at)
            if value is None:
                self._payloads.update((r.offset, r.value) for r in self.log.read(at, 4096))
                value = self._payloads[at]
            values.append(value)
        return values

    # --------------------------------------------------------------- publish

    def publish(self, publish: int, payload: bytes) -> None:
        """`QueueShell.admit` + `append`, through the shipped pipeline."""
        message = Message("", self.queue, payload, PERSISTENT, self.hooks.now_ms)
        if self.pipeline.admit(message) is not Admission.ACCEPT:
            self.hooks.confirm(self.queue, publish, False)
            return
        self.pipeline.append_many([message], PublishConfirm(self.hooks, self.queue, publish))

    def flush(self) -> None:
        """The syncs land: the log's (the pipeline's confirms), then the settles gathered
        so far are written to the cursor log and it syncs too (the settle writer's)."""
        if self.closed:
            return
        self._log_commits.complete()
        self._report_committed()
        self._gather.close()
        self._cursor_commits.complete()

    def moved(self, change: Callable[[], object]) -> None:
        """`gate.moved` (a fetch, an in-sync commit): a release goes to the pipeline."""
        self.gate.moved(change)
        self._report_committed()

    def _made_ready(self, effects: list[Effect], count: int) -> None:
        """`QueueShell._made_ready`: the pipeline made `count` messages ready."""
        self._report_committed()
        self._run(effects)
        self.pump()

    def _report_committed(self) -> None:
        hw = self.gate.high_watermark
        start = max(self._reported, self.log.log_start_offset)
        if hw > start:
            for offset, value in enumerate(self._values(start, hw), start):
                self.hooks.committed(self.queue, self.node, offset, value)
        self._reported = max(self._reported, hw)

    def _settled(self, floor: int) -> None:
        """`QueueShell._settled`: the settle writer wrote everything below `floor`."""
        self.gate.acks_grew(floor)
        self.core.forget_below(floor)
        self._records.settled_below(floor)

    # ------------------------------------------------------------- consumers

    def add_consumer(self, tag: str, prefetch: int, sink: ConsumerSink) -> None:
        self.core.add_consumer(Consumer(tag, tag, prefetch), self.hooks.now_ms)
        self._sinks[tag] = sink
        self.pump()

    def channel_closed(self, tag: str) -> None:
        """QueueShell.channel_closed: forget the consumer, requeue what it held."""
        if self._sinks.pop(tag, None) is not None:
            self.core.remove_consumer(tag, self.hooks.now_ms)
        self._run(self.core.requeue_channel(tag))
        self.pump()

    def ack(self, offsets: list[int]) -> None:
        gate = self.gate
        if not gate.settles:
            self._held_acks.hold(offsets, fenced=gate.fenced is not None)
            return
        self._run(self.core.ack(offsets))
        self.pump()

    def _apply_held_acks(self) -> None:
        """QueueShell._apply_held_acks (`gate.on_rejoin`)."""
        held = self._held_acks.take()
        if held and not self.closed:
            self.hooks.stats["held_acks_applied"] += len(held)
            self.ack(held)

    def pump(self) -> None:
        if not self.closed:
            self._run(self.core.pump(self.hooks.now_ms, {}))

    def _run(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Deliver):
                sink = self._sinks.get(effect.consumer_tag or "")
                self.mark.delivered(effect.offset)
                if sink is not None:
                    payload = self._records.record_at(effect.offset).value
                    sink.deliver(self, effect.channel_key, effect.offset, payload,
                                 effect.redelivered)
            elif isinstance(effect, Settle):
                self.settler.settle(effect.lo, effect.hi)

    # --------------------------------------------------------------- closing

    def close(self, reason: str, on_cancel: Callable[[ConsumerSink], None] | None = None
              ) -> None:
        """Broker.close_queue: fence, cancel the consumers, finish the writes, close."""
        if self.closed:
            return
        self.gate.fence(reason)
        sinks, self._sinks = list(self._sinks.values()), {}
        for sink in sinks:
            sink.cancelled(self)
        self._gather.close()
        self._cursor_commits.complete()
        self.closed = True
        self.settler.close()
        self._log_commits.fail_all(GateFenced(reason))
        self.mark.close()  # a clean stop knows exactly
        self.log.close()
        self.cursor.close()

    def crash(self) -> None:
        """The node lost power: nothing more happens here, nothing is synced."""
        self.closed = True
        self.settler.close()
        for sink in list(self._sinks.values()):
            sink.cancelled(self)  # the client's connection broke
        self._sinks.clear()
