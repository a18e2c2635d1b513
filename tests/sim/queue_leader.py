"""`LeaderReplica`: a replicated queue's leader on one simulated node.

It opens the queue as the real shell does, with the real code: `QueueShell.open`
is `queue_opening.open_queue_files` with a `ReplicaSetup` (the log, cursor log
and delivery mark on the node's file system, `open_gate`, the `QueueCore`
recovered with what may have been delivered flagged, the messages above the
high watermark held, and flagged too when released if they may have been
delivered), here with small log segments. The `ReplicationGate` is
used as is (`wrote`, `persisted`, `moved`, `acks_grew`, `fence`, `isolate` /
`rejoin`), and so are `HeldMessages`, which makes written messages ready in
the core only below the high watermark, `WaitingConfirms`, which lets
publishes go only once the high watermark passes them, and `HeldAcks`, which
keeps an isolated leader's acks until it rejoins. Around them it mirrors the
rest of `QueueShell`, synchronously: the gate's `Release`s applied as
`AppendPipeline.release` does (held messages made ready, then the confirms
the high watermark passed, nacked when the in-sync set was too small; the
pipeline resolves futures, which need an event loop), held acks applied when
the leader rejoins (`ack`, `_apply_held_acks`),
settles written to the cursor log by a group commit and then `acks_grew`, and
retention deleting settled segments (`reclaim_settled`).

Where the real shell waits for an fsync thread, this one leaves the writes
unsynced until the simulation's `flush` (a random later tick), so a crash in
between loses them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from logbroker.queue.consumers import Consumer
from logbroker.queue.effects import Deliver, Effect, Settle
from logbroker.queue.held_acks import HeldAcks
from logbroker.queue.held_messages import HeldMessages
from logbroker.queue.message_meta import MessageMeta, MetaRun
from logbroker.queue.queue_limits import QueueLimits
from logbroker.queue.queue_opening import open_queue_files
from logbroker.queue.queue_settings import QueueSettings
from logbroker.queue.replica_setup import ReplicaSetup
from logbroker.queue.replication_gate import Release
from logbroker.queue.retention import Retention, SegmentSummary, reclaim_floor
from logbroker.queue.waiting_confirms import WaitingConfirms
from segments.log import LogConfig
from segments.memory_filesystem import MemoryFileSystem
from segments.record_batch import Record

VHOST = "/"
# Small segments, so retention deletes segments and followers fall below the log start.
QUEUE_LOG_CONFIG = LogConfig(segment_bytes_max=768, index_interval_bytes=128)
RETAIN_NOTHING = Retention(retention_ms=None, retention_bytes=0)


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


@dataclass
class _Pending:
    next_offset: int
    publish: int


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
        self._held = HeldMessages(opened.held, opened.held_delivered_below)
        self._sinks: dict[str, ConsumerSink] = {}
        self._unsynced: list[_Pending] = []  # written, waiting for the log's fsync
        self._confirms: WaitingConfirms[_Pending] = WaitingConfirms()  # durable, wait for the hw
        self._settles: list[tuple[int, int]] = []
        self._held_acks = HeldAcks()  # acks taken while cut off from the controller
        self._reported = self.log.log_start_offset  # committed offsets given to the checker
        self.changes = 0  # bumped on what wakes a long-polling fetch (gate.changes)
        self.gate.listener = self
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
        """admit + append_many of one message (QueueShell): refused, or written now."""
        refusal = self.gate.publish_refusal()
        if refusal is not None:
            self.hooks.confirm(self.queue, publish, False)
            return
        result = self.log.append([Record(payload, self.hooks.now_ms)])
        self.gate.wrote(result.next_offset)
        self.changes += 1
        self._payloads[result.base_offset] = payload
        self._made_ready(self._held.written(self.core, result.base_offset,
                                            MetaRun.of([MessageMeta(len(payload))]),
                                            self.gate.high_watermark))
        self._unsynced.append(_Pending(result.next_offset, publish))

    def flush(self) -> None:
        """The group commits complete: the log's fsync, then the cursor's (settles)."""
        if self.closed:
            return
        if self._unsynced:
            self.log.sync()
            durable, self._unsynced = self._unsynced, []
            for pending in durable:
                release = self.gate.persisted(pending.next_offset)
                if self.gate.fenced is not None:
                    self.hooks.confirm(self.queue, pending.publish, False)  # GateFenced
                else:
                    self._confirms.add(pending.next_offset, pending)
                self.release(release)
            self.changes += 1
        self._flush_settles()

    def moved(self, change: Callable[[], object]) -> None:
        """`gate.moved` (a fetch, an in-sync commit): a release comes to `release`."""
        self.gate.moved(change)

    def release(self, release: Release) -> None:
        """What the gate let go (`AppendPipeline.release`): held messages below the high
        watermark become ready, then the confirms it passed resolve."""
        self._made_ready(self._held.release(self.core, release.high_watermark))
        for pending in self._confirms.passed(release.high_watermark):
            self.hooks.confirm(self.queue, pending.publish, release.refusal is None)

    def abandon(self, reason: str) -> None:
        """The gate is fenced (`AppendPipeline.abandon`): nothing waiting is confirmed."""
        for pending in self._confirms.take_all():
            self.hooks.confirm(self.queue, pending.publish, False)  # GateFenced

    def _made_ready(self, released: tuple[int, list[Effect]]) -> None:
        count, effects = released
        self._report_committed()
        self._run(effects)
        self.changes += 1
        if count:
            self.pump()

    def _report_committed(self) -> None:
        hw = self.gate.high_watermark
        start = max(self._reported, self.log.log_start_offset)
        if hw > start:
            for offset, value in enumerate(self._values(start, hw), start):
                self.hooks.committed(self.queue, self.node, offset, value)
        self._reported = max(self._reported, hw)

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
                    payload = self._values(effect.offset, effect.offset + 1)[0]
                    sink.deliver(self, effect.channel_key, effect.offset, payload,
                                 effect.redelivered)
            elif isinstance(effect, Settle) and not self.closed:
                self._settles.append((effect.lo, effect.hi))

    def _flush_settles(self) -> None:
        ranges, self._settles = self._settles, []
        if not ranges:
            return
        self.cursor.append(ranges)
        self.cursor.sync()
        self.gate.acks_grew(self.cursor.ack_floor)
        self.changes += 1
        self.core.forget_below(self.cursor.ack_floor)
        summaries = [SegmentSummary(*s) for s in self.log.segment_summaries()]
        floor = reclaim_floor(summaries, self.cursor.ack_floor, self.hooks.now_ms,
                              RETAIN_NOTHING)
        if floor > self.log.log_start_offset:
            self.log.delete_before(floor)

    # --------------------------------------------------------------- closing

    def close(self, reason: str, on_cancel: Callable[[ConsumerSink], None] | None = None
              ) -> None:
        """Broker.close_queue: fence, cancel the consumers, finish the writes, close."""
        if self.closed:
            return
        self.gate.fence(reason)
        self.changes += 1
        sinks, self._sinks = list(self._sinks.values()), {}
        for sink in sinks:
            sink.cancelled(self)
        self._flush_settles()
        self.closed = True
        for pending in [*self._unsynced, *self._confirms.take_all()]:
            self.hooks.confirm(self.queue, pending.publish, False)  # GateFenced
        self._unsynced = []
        self.mark.close()  # a clean stop knows exactly
        self.log.close()
        self.cursor.close()

    def crash(self) -> None:
        """The node lost power: nothing more happens here, nothing is synced."""
        self.closed = True
        for sink in list(self._sinks.values()):
            sink.cancelled(self)  # the client's connection broke
        self._sinks.clear()
