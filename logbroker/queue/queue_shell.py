"""The I/O shell of one queue: QueueCore + its segment log + its cursor log.

Theory of operation. A publish is admitted, appended to the log through a
GroupCommitter (resolving once durable under the queue's fsync policy), made
ready in the core in offset order and confirmed by the `AppendPipeline` this
shell holds (on a replicated queue's leader, both wait for the high
watermark, which the pipeline applies as the `ReplicationGate` releases it).
Every call into the core returns effects, which `EffectRunner` carries out
strictly in order:

- `Deliver`: take the message from the record cache (records just written, or
  read ahead from the log) and hand it to the consumer's sink;
- `DeadLetter`: republish through the broker's callback, awaited, before the
  `Settle` that follows it (so a crash duplicates rather than loses);
- `Settle`: hand the ranges to the `SettleWriter` (one cursor-log append per
  gathering window, 5 ms on asyncio, synced on an interval: a lost settle
  only means a redelivery), which also deletes the segments they free;
- `QueueExpired`: tell the broker to delete the queue.

A delivery mark, kept ahead of the highest offset ever delivered and
persisted before any delivery passes it, tells a restart which unacked
messages may have been delivered: only those come back `redelivered`.

The shell decides synchronously; bytes and time go through its `ShellIO`
(shell_io.py): the log's and the cursor's commits (durable by callback), the
segment reclaimer, `call_soon` for the pump and `call_later` for the core's
timer. `LoopShellIO` is asyncio's; the deterministic simulation runs this
same shell over its own (tests/sim/leader_ports.py). Futures exist only at
the asyncio edge: `append`/`append_many` wrap a publish's `Confirm` in one
(`append_confirming` takes any `Confirm`), and the awaited `settles_durable`
and `close` go through the ports' coroutines.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from logbroker.errors import BrokerError
from logbroker.message import Message
from logbroker.queue.append_pipeline import AppendPipeline, Confirm
from logbroker.queue.consumers import Consumer
from logbroker.queue.delivery_mark import DeliveryMark
from logbroker.queue.delivery_sink import DeliverySink, RecordSink
from logbroker.queue.effect_runner import EffectRunner
from logbroker.queue.effects import (
    DeadLetter,
    DeadLetterReason,
    Deliver,
    Effect,
    QueueExpired,
    Settle,
)
from logbroker.queue.flow_gate import FlowGate
from logbroker.queue.held_acks import HeldAcks
from logbroker.queue.held_messages import HeldMessages
from logbroker.queue.message_meta import NO_EXPIRY
from logbroker.queue.publisher_flow import PublisherFlow
from logbroker.queue.queue_core import ConsumerRefused, QueueCore
from logbroker.queue.queue_limits import Admission
from logbroker.queue.queue_opening import open_queue_files
from logbroker.queue.queue_settings import QueueSettings
from logbroker.queue.queue_stats import AppendWaiters, QueueCounters
from logbroker.queue.queue_type import (
    LOCAL,
    REPLICATED_LEADER,
    Capabilities,
    Dequeued,
    QueueStats,
)
from logbroker.queue.record_cache import RecordCache
from logbroker.queue.replica_setup import ReplicaSetup
from logbroker.queue.replication_gate import GateFenced, ReplicationGate
from logbroker.queue.settle_writer import SettleWriter
from logbroker.queue.shell_io import Handle, LoopShellIO, ShellIO
from logbroker.queue.sidecar_writer import SidecarWriter
from segments.clock import SYSTEM_CLOCK, Clock
from segments.cursor_log import CursorLog
from segments.filesystem import FileSystem
from segments.log import Log, LogConfig
from segments.record_batch import LogRecord, RecordBatch

__all__ = ["DeliverySink", "QueueSettings", "QueueShell", "ReplicaSetup"]
logger = logging.getLogger(__name__)

DeadLetterCallback = Callable[["QueueShell", Message, DeadLetterReason], Awaitable[None]]
ExpiredCallback = Callable[["QueueShell"], None]
UnusedCallback = Callable[["QueueShell"], None]


class QueueShell:
    def __init__(
        self, settings: QueueSettings, fs: FileSystem, directory: str, log: Log,
        cursor: CursorLog, core: QueueCore, delivery_mark: DeliveryMark,
        held: HeldMessages | None = None, clock: Clock = SYSTEM_CLOCK,
        io: ShellIO | None = None,
    ) -> None:
        """`io`: where bytes and time go (None: the asyncio loop's, `LoopShellIO`)."""
        self.settings = settings
        self._fs = fs
        self.directory = directory
        self.log = log
        self.cursor = cursor
        self.core = core
        self._io = io or LoopShellIO(fs, log, cursor, settings.fsync_policy)
        self._io.after_write(self._after_write)
        # Sealed segments get their meta sidecar, so a restart need not read them.
        self._sidecars = SidecarWriter(fs, directory, log, self._io.call_soon)
        self._settler = SettleWriter(log, cursor, self._io.cursor_commits, self._io.gather,
                                     self._io.reclaimer, lambda: self.settings.retention,
                                     self._settled, clock)
        self._sinks: dict[str, DeliverySink] = {}
        self._record_sinks: dict[str, RecordSink] = {}  # those of `_sinks` that take them
        # The core's time: the injected clock's wall reading, since expiry is computed
        # from it and must outlive a restart.
        self.clock: Callable[[], int] = clock.wall_ms
        self._records = RecordCache(log)
        self._delivery_mark = delivery_mark
        self._pump_scheduled: Handle | None = None
        self._timer: Handle | None = None
        self._effects = EffectRunner(self._carry_out_one, self._dead_letter)
        self.on_dead_letter: DeadLetterCallback | None = None
        self.on_expired: ExpiredCallback | None = None
        self.on_unused: UnusedCallback | None = None  # its last consumer went
        self.closed = False
        self.had_consumers = False  # auto-delete applies only once a consumer came
        self.counters = QueueCounters()
        # The node's totals, which outlive the queue (MessageStats.queues; the broker
        # sets it): what this queue hands out and has acked counts there too.
        self.node_counters = QueueCounters()
        self.appends = AppendWaiters()
        self._held = held or HeldMessages()  # written, waiting for the high watermark
        self._pipeline = AppendPipeline(lambda: self.settings, core, self._io.log_commits,
                                        self._records, self._held, clock,
                                        self._made_ready)
        # Set for a replicated queue's leader: readiness and confirms wait for the
        # high watermark (replication_gate).
        self.replication: ReplicationGate | None = None
        self._held_acks = HeldAcks()  # acks taken while cut off from the controller
        # Publishers wait while this queue's consumers catch up (publisher_flow).
        flow = settings.publisher_flow
        self.flow_gate = FlowGate(lambda: (self.core.message_count, self.core.consumer_count,
                                           self.counters.delivered),
                                  PublisherFlow(flow) if flow is not None else None,
                                  clock, enabled=flow is not None)

    @property
    def name(self) -> str:
        return self.settings.name

    # ------------------------------------------------------------------ open

    @classmethod
    def open(cls, settings: QueueSettings, fs: FileSystem, directory: str,
             replica: ReplicaSetup | None = None, clock: Clock = SYSTEM_CLOCK,
             io: Callable[[Log, CursorLog], ShellIO] | None = None,
             log_config: LogConfig | None = None) -> QueueShell:
        """Open (or create) the queue's files and rebuild its state from them
        (queue_opening); `replica` makes this the leader of a replicated queue. `io`
        makes the shell's ports for its log and cursor (None: asyncio's); `log_config`
        is the segment log's (None: the default)."""
        opened = open_queue_files(settings, fs, directory, replica, clock.wall_ms(),
                                  log_config)
        shell = cls(settings, fs, directory, opened.log, opened.cursor, opened.core,
                    opened.mark, HeldMessages(opened.held, opened.held_delivered_below), clock,
                    io(opened.log, opened.cursor) if io is not None else None)
        if opened.gate is not None:
            shell.replication = opened.gate
            shell._pipeline.replicate(opened.gate)
            opened.gate.on_rejoin = shell._rejoined
        return shell

    # --------------------------------------------------------------- publish

    def admit(self, message: Message) -> Admission:
        """Admit a publish; an accepted one must be followed by `append(message)`, and
        counts against reject-publish limits until written (`AppendPipeline`)."""
        return self._pipeline.admit(message)

    def admit_many(self, messages: Sequence[Message]) -> list[Admission] | None:
        """`admit` for each of `messages` in order; None when all are accepted (a queue
        without reject-publish limits: the usual case, decided once for the batch)."""
        return self._pipeline.admit_many(messages)

    @property
    def refusal(self) -> str:
        """Why the last refused publish was refused (the REST answer says it)."""
        return self._pipeline.refusals.last

    def append(self, message: Message) -> asyncio.Future[int]:
        """Send an admitted message to the log now; the future gives its offset.

        The message is queued for the log during this call, so the order of
        `append` calls is the order of the log, however the callers' tasks are
        scheduled. It becomes deliverable as soon as it is written, as on
        RabbitMQ; the future (the publisher's confirm) resolves once it is durable
        under the queue's fsync policy. A single node has no failover that could
        take a written message back; replicated queues keep the high-watermark
        rule (DESIGN.md section 6).
        """
        confirm: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pipeline.append_many([message], confirm)
        return confirm

    def append_many(self, messages: Sequence[Message]) -> asyncio.Future[int]:
        """`append` for several admitted messages at once: one write, one future.

        The future gives the first message's offset; the others follow it.
        """
        confirm: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pipeline.append_many(messages, confirm)
        return confirm

    def append_confirming(self, messages: Sequence[Message], confirm: Confirm) -> None:
        """`append_many` with the outcome handed to `confirm` (no event loop needed)."""
        self._pipeline.append_many(messages, confirm)

    def _made_ready(self, effects: list[Effect], count: int) -> None:
        """`count` more messages are ready (with the core's effects of making them so):
        wake the log's followers and the deliveries."""
        if effects:
            self._run(effects)
        self.counters.published += count
        self.appends.notify()
        self.schedule_pump()

    def hold_publisher(self, connection_id: str) -> asyncio.Future[None] | None:
        """What a connection that just published here must wait for (publisher_flow)."""
        return self.flow_gate.hold(connection_id, self._sinks.values())

    # ------------------------------------------------------------- consumers

    def add_consumer(self, consumer: Consumer, sink: DeliverySink) -> None:
        self.core.add_consumer(consumer, self.clock())
        self._sinks[consumer.tag] = sink
        if isinstance(sink, RecordSink):
            self._record_sinks[consumer.tag] = sink
        self.schedule_pump()

    def remove_consumer(self, tag: str) -> None:
        self.core.remove_consumer(tag, self.clock())
        self._sinks.pop(tag, None)
        self._record_sinks.pop(tag, None)
        self.schedule_pump()
        self._arm_timer()

    def consumer_tags(self) -> list[str]:
        return list(self._sinks)

    def ack(self, offsets: Sequence[int]) -> None:
        gate = self.replication
        if gate is not None and not gate.settles:
            self._held_acks.hold(offsets, fenced=gate.fenced is not None)
            return
        for counters in (self.counters, self.node_counters):
            counters.count_acks(len(offsets))
        self._run(self.core.ack(offsets))
        self.schedule_pump()

    @property
    def held_messages(self) -> int:
        """Messages written but not ready yet (above a replicated queue's high watermark)."""
        return len(self._held)

    @property
    def held_acks(self) -> int:
        """Acks held while the leader is cut off from the controller (`HeldAcks`)."""
        return len(self._held_acks)

    def _rejoined(self) -> None:
        """The gate rejoined (`on_rejoin`): the acks held meanwhile count, and what the
        pump left while isolated goes out."""
        held = self._held_acks.take()
        if held and not self.closed:
            self.ack(held)
        self.schedule_pump()

    def reject(self, offsets: Sequence[int], requeue: bool) -> None:
        self._run(self.core.reject(offsets, requeue))
        self.schedule_pump()

    async def settles_durable(self) -> None:
        """Every ack and discard so far is on disk here and, replicated, held by every
        in-sync follower (a tx.commit waits for this); GateFenced if it cannot be."""
        await self._effects.finished()  # dead-lettering holds settles back
        gate = self.replication
        if gate is not None and not gate.settles:
            raise GateFenced(gate.fenced or gate.isolated or "the queue settles nothing now")
        await self._io.settles_durable(self._settler)
        if gate is not None:
            await gate.acks_replicated()

    def channel_closed(self, channel_key: str, requeue: bool = True) -> None:
        """Forget the channel's consumers and requeue what it left unacked (unless
        `requeue` is False: the caller requeues it later, see `requeue_held`)."""
        tags = [t for t, sink in self._sinks.items() if sink.channel_key == channel_key]
        for tag in tags:
            self.remove_consumer(tag)
        if requeue:
            self._run(self.core.requeue_channel(channel_key))
        self.schedule_pump()
        if tags:
            self._notice_unused()

    def requeue_held(self, channel_key: str, offsets: Sequence[int]) -> None:
        """Requeue those of `offsets` the channel still holds unacked."""
        held = set(self.core.unacked_of(channel_key))
        still = [offset for offset in offsets if offset in held]
        if still and not self.closed:
            self.reject(still, requeue=True)

    def get(self, channel_key: str, no_ack: bool) -> tuple[int, bool, Message] | None:
        """basic.get: (offset, redelivered, message) or None when the queue is empty."""
        found: tuple[int, bool, Message] | None = None
        if self.replication is not None and not self.replication.delivers():
            return None  # a leader that may have been replaced hands out nothing
        effects = self.core.get(channel_key, no_ack, self.clock())
        for effect in effects:
            if isinstance(effect, Deliver):
                self._delivery_mark.delivered(effect.offset)
                self._count_delivery(effect.redelivered, got=True)
                found = (effect.offset, effect.redelivered, self.message_at(effect.offset))
        self._run([e for e in effects if not isinstance(e, Deliver)])
        self._arm_timer()
        return found

    # ------------------------------------------------ the queue interface (QueueType)

    def capabilities(self) -> Capabilities:
        return LOCAL if self.replication is None else REPLICATED_LEADER

    async def declared(self) -> QueueStats:
        self.core.touch(self.clock())
        return await self.stats()

    async def consume(self, consumer: Consumer, sink: DeliverySink) -> None:
        try:
            self.add_consumer(consumer, sink)
        except ConsumerRefused as refused:
            text = refused.text
            if refused.reply_code == 403:
                text = f"queue '{self.name}' in vhost '{self.settings.vhost}' in exclusive use"
            raise BrokerError(refused.reply_code, text.split(" - ", 1)[-1]) from refused
        self.had_consumers = True

    def cancel(self, consumer_tag: str) -> None:
        self.remove_consumer(consumer_tag)
        self._notice_unused()

    def _notice_unused(self) -> None:
        """Auto-delete applies once a consumer came and the last one went."""
        if self.had_consumers and self.core.consumer_count == 0 and self.on_unused:
            self.on_unused(self)

    async def dequeue(self, channel_key: str, no_ack: bool) -> Dequeued | None:
        found = self.get(channel_key, no_ack)
        if found is None:
            return None
        return Dequeued(*found, self.core.message_count)

    async def purge(self) -> int:
        count, effects = self.core.purge()
        self._run(effects)
        return count

    async def stats(self) -> QueueStats:
        return QueueStats(self.core.message_count, self.core.consumer_count,
                          self.log_start_offset, self.readable_end)

    # --------------------------------------------------------------- pumping

    def schedule_pump(self) -> None:
        if self._pump_scheduled is None and not self.closed:
            self._pump_scheduled = self._io.call_soon(self._pump)

    def _after_write(self) -> None:
        self._pump_if_scheduled()
        self._sidecars.wrote()

    def _pump_if_scheduled(self) -> None:
        """After a write: deliver what it made ready now, not an iteration later."""
        if self._pump_scheduled is not None:
            self._pump_scheduled.cancel()
            self._pump()

    def _pump(self) -> None:
        self._pump_scheduled = None
        if self.closed:
            return
        if self.replication is not None and not self.replication.delivers():
            return  # pumped again when the lease is back (or the shell closes)
        credit = {}
        for sink in self._sinks.values():
            room = sink.credit()
            if room is not None:
                credit[sink.channel_key] = room
        self._run(self.core.pump(self.clock(), credit))
        self._arm_timer()
        self.flow_gate.check()

    def _arm_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.core.next_deadline_ms()
        if deadline is not None and not self.closed:
            delay = max(0.0, (deadline - self.clock()) / 1000)
            self._timer = self._io.call_later(delay, self._tick)

    def _tick(self) -> None:
        self._timer = None
        if not self.closed:
            self._run(self.core.tick(self.clock()))
            self.schedule_pump()

    # ---------------------------------------------------------------- effects

    def _run(self, effects: list[Effect]) -> None:
        """Carry out effects in order; dead-lettering makes the rest wait for it."""
        self._effects.run(effects)

    async def _dead_letter(self, effect: DeadLetter) -> None:
        if self.on_dead_letter is not None and not self.closed:
            await self.on_dead_letter(self, self.message_at(effect.offset), effect.reason)

    def _carry_out_one(self, effect: Effect) -> None:
        if isinstance(effect, Deliver):
            self._delivery_mark.delivered(effect.offset)
            self._count_delivery(effect.redelivered)
            tag = effect.consumer_tag or ""
            record_sink = self._record_sinks.get(tag)
            if record_sink is not None:
                record_sink.deliver_record(
                    self.name, effect.consumer_tag, effect.offset, effect.redelivered,
                    self._records.record_at(effect.offset), self.ttl_left_ms(effect.offset))
                return
            sink = self._sinks.get(tag)
            if sink is not None:
                sink.deliver(self.name, effect.consumer_tag, effect.offset, effect.redelivered,
                             self.message_at(effect.offset))
        elif isinstance(effect, Settle):
            self._settler.settle(effect.lo, effect.hi)
        elif isinstance(effect, QueueExpired) and self.on_expired is not None:
            self.on_expired(self)

    def _settled(self, floor: int) -> None:
        """Everything below `floor` is settled on disk (SettleWriter)."""
        if self.replication is not None:
            self.replication.acks_grew(floor)
        self.core.forget_below(floor)
        self._records.settled_below(floor)
        self._sidecars.wrote()  # segments reclaimed since: their sidecars go too

    def reclaim_settled(self) -> None:
        """Delete the segments that are settled and beyond retention (see `retention`)."""
        self._settler.reclaim()

    # ------------------------------------------------------------------ reads

    @property
    def readable_end(self) -> int:
        """One past the last message readers may see (written, in offset order)."""
        return self.core.next_offset

    def read_log(self, offset: int, max_bytes: int) -> list[LogRecord]:
        """Records from `offset` (settled ones too, while retention keeps them), non-destructively.

        An offset below the log's start reads from the start; [start, readable_end) is
        what exists.
        """
        offset = max(offset, self.log.log_start_offset)
        end = self.readable_end
        if offset >= end:
            return []
        return [r for r in self.log.read(offset, max_bytes) if r.offset < end]

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def read_batches(self, offset: int, max_bytes: int) -> list[RecordBatch]:
        """The log's stored batches from the one holding `offset` (see `ReplayView`)."""
        return self.log.read_batches(offset, max_bytes)

    def offset_for_timestamp(self, timestamp_ms: int) -> int:
        return self.log.offset_for_timestamp(timestamp_ms)

    def _count_delivery(self, redelivered: bool, got: bool = False) -> None:
        for counters in (self.counters, self.node_counters):
            counters.count_delivery(redelivered, got)

    def ttl_left_ms(self, offset: int) -> int | None:
        """Milliseconds until the message at `offset` expires here (None: never): a
        duration, so another node can tell expiry without comparing clocks."""
        expires_at_ms = self.core.expires_at_ms(offset)
        return None if expires_at_ms == NO_EXPIRY else max(0, expires_at_ms - self.clock())

    def message_at(self, offset: int) -> Message:
        return Message.from_record(self._records.record_at(offset))

    # ---------------------------------------------------------------- closing

    def cancel_consumers(self, leader_moved: bool = False) -> None:
        """The queue is going away (`leader_moved`: from this node): tell every consumer."""
        for tag, sink in list(self._sinks.items()):
            sink.consumer_cancelled(self.name, tag, leader_moved)
        self._sinks.clear()
        self._record_sinks.clear()

    async def close(self) -> None:
        if self.closed:
            return
        await self._effects.drain()
        await self._io.drain(self._settler)
        self.closed = True
        self.flow_gate.release()
        if self.replication is not None:
            self.replication.close("the queue's leader replica closed")
        if self._timer is not None:
            self._timer.cancel()
        self._settler.close()
        await self._io.close()
        self._sidecars.finish()  # a restart after a clean stop reads no segment but the last
        self._delivery_mark.close()  # a clean stop knows exactly
        self.log.close()
        self.cursor.close()

