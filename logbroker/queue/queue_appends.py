"""`QueueAppends`: how a queue takes publishes (part of `QueueShell`, as a mixin).

A publish is admitted by the core (`admit`: reject-publish limits, too few
in-sync replicas), appended to the log through the queue's group committer,
and made ready in the core once written, in offset order; a replicated
queue's leader makes it ready, and confirms it, only below the high
watermark (`replication_gate.py`). The order of `append` calls is the order
of the log.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from logbroker.message import Message, records_of
from logbroker.queue.admissions import Admissions
from logbroker.queue.effects import Effect
from logbroker.queue.group_commit import GroupCommitter
from logbroker.queue.message_meta import MessageMeta, MetaRun, metas_of
from logbroker.queue.queue_core import QueueCore
from logbroker.queue.queue_limits import Admission
from logbroker.queue.queue_settings import QueueSettings
from logbroker.queue.queue_stats import AppendWaiters, QueueCounters
from logbroker.queue.record_cache import RecordCache
from logbroker.queue.replication_gate import ReplicationGate
from segments.log import AppendResult
from segments.record_batch import Record

__all__ = ["QueueAppends"]


def _copy_outcome(source: asyncio.Future[int], target: asyncio.Future[int]) -> None:
    if target.done():
        return
    if source.cancelled() or source.exception() is not None:
        target.set_exception(source.exception() or asyncio.CancelledError())
    else:
        target.set_result(source.result())


class QueueAppends(ABC):
    """The publish side of a queue shell; the shell provides the state below and the
    abstract methods."""

    settings: QueueSettings
    core: QueueCore
    admissions: Admissions
    replication: ReplicationGate | None
    counters: QueueCounters
    appends: AppendWaiters
    clock: Callable[[], int]
    _committer: GroupCommitter[Sequence[Record], AppendResult]
    _records: RecordCache
    _appended: dict[int, MessageMeta]
    _held_delivered_below: int

    @abstractmethod
    def _run(self, effects: list[Effect]) -> None:
        """Carry out the core's effects in order."""

    @abstractmethod
    def schedule_pump(self) -> None:
        """Deliver what is ready, once this loop iteration is done."""

    def admit(self, message: Message) -> Admission:
        """Admit a publish; an accepted one must be followed by `append(message)`, and
        counts against reject-publish limits until then (see `Admissions`)."""
        if self.replication is not None:
            refusal = self.replication.publish_refusal()
            if refusal is not None:
                self.admissions.refused(f"queue '{self.settings.name}' refused it: {refusal}",
                                        log=True)
                return Admission.REJECT
        admission = self.core.admit(message.size_bytes, self.admissions.count,
                                    self.admissions.bytes)
        if admission is Admission.ACCEPT:
            self.admissions.admitted(message)
        else:
            self.admissions.refused(f"queue '{self.settings.name}' is full "
                                    f"(x-overflow {self.core.limits.overflow.value})")
        return admission

    def admit_many(self, messages: Sequence[Message]) -> list[Admission] | None:
        """`admit` for each of `messages` in order; None when all are accepted (a queue
        without reject-publish limits: the usual case, decided once for the batch)."""
        if (self.core.accepts_all() and (self.replication is None
                                          or self.replication.publish_refusal() is None)):
            self.admissions.admitted_all(messages)
            return None
        return [self.admit(message) for message in messages]

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
        return self.append_many([message])

    def append_many(self, messages: Sequence[Message]) -> asyncio.Future[int]:
        """`append` for several admitted messages at once: one write, one future.

        The future gives the first message's offset; the others follow it.
        """
        metas = metas_of(messages, self.settings.message_ttl_ms, self.clock())
        share = (len(messages), sum(metas.sizes))  # what they count against the limits
        # A transient message, or any message in a transient queue, is not lost to a
        # crash it could survive anyway: it is confirmed once written.
        durable = self.settings.durable and any(m.persistent for m in messages)
        confirmed: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        admitted = True  # counts against reject-publish limits until it is ready

        def on_written(result: AppendResult) -> None:
            nonlocal admitted
            admitted = False
            self.admissions.settled(*share)
            if self.core.consumer_count:  # likely delivered at once: spare the read-back
                self._records.wrote(result.base_offset, records)
            if self.replication is not None:
                self.replication.wrote(result.next_offset)
            try:
                self._make_ready(result.base_offset, metas)
            except Exception as error:  # a broken invariant must fail the publish
                if not confirmed.done():
                    confirmed.set_exception(error)

        def on_durable(done: asyncio.Future[AppendResult]) -> None:
            if admitted:
                self.admissions.settled(*share)  # the write itself failed
            if confirmed.done():
                return
            if done.cancelled() or done.exception() is not None:
                confirmed.set_exception(done.exception() or asyncio.CancelledError())
            elif self.replication is None:
                confirmed.set_result(done.result().base_offset)
            else:
                result = done.result()
                self.replication.persisted(result.next_offset)
                replicated = self.replication.confirm_when_replicated(
                    result.base_offset, result.next_offset)
                replicated.add_done_callback(lambda f: _copy_outcome(f, confirmed))

        try:
            records = records_of(messages)
            written = self._committer.submit_nowait(records, durable=durable,
                                                    on_written=on_written)
        except Exception:
            self.admissions.settled(*share)
            raise
        written.add_done_callback(on_durable)
        return confirmed

    def _make_ready(self, base_offset: int, metas: MetaRun) -> None:
        """The messages written at `base_offset` onwards are ready (in order, and, when
        replicated, once below the high watermark)."""
        if (self.replication is None and not self._appended
                and base_offset == self.core.next_offset):
            # The usual case, in order and not replicated: straight into the core.
            effects = self.core.enqueue_many(base_offset, metas, self._held_delivered_below)
            if effects:
                self._run(effects)
            self._note_ready(len(metas))
            return
        for index, meta in enumerate(metas):  # out of order, or replicated: one by one
            self._appended[base_offset + index] = meta
        self._release_held()

    def _release_held(self) -> None:
        """Make written messages ready in offset order (replicated: below the high watermark)."""
        limit = self.replication.high_watermark if self.replication is not None else None
        released = False
        while self.core.next_offset in self._appended and (
                limit is None or self.core.next_offset < limit):
            next_offset = self.core.next_offset
            self._run(self.core.enqueue(next_offset, self._appended.pop(next_offset),
                                        next_offset < self._held_delivered_below))
            self.counters.published += 1
            released = True
        if released:
            self._note_ready(0)

    def _note_ready(self, count: int) -> None:
        """`count` more messages are ready (counted already when 0): wake the waiters
        and the deliveries."""
        self.counters.published += count
        self.appends.notify()
        self.schedule_pump()
