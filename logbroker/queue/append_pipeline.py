"""`AppendPipeline`: how a publish enters a queue shell's log, becomes ready and is confirmed.

Theory of operation. A publish is admitted first (`admit`): a replicated
queue's gate may refuse it (fenced, cut off from the controller, handing
over, too few in-sync replicas), then the core's length limit may. An
admitted publish is appended (`append_many`): its records are queued on the
log's committer (a `CommitPort`: the asyncio `GroupCommitter`, or the
simulation's) during the call, so the order of `append` calls is
the order of the log, however the callers' tasks are scheduled. Then two
steps, each a method of this pipeline that the committer calls back:

1. `_written` (the write landed, before its fsync): the admission no longer
   counts against the length limit, the records go to the record cache when
   a consumer is likely to want them at once, the gate learns the leader's
   written end, and the messages go to `HeldMessages`, which makes them
   ready in offset order: at once on a single node (as RabbitMQ does: a
   single node has no failover that could take a written message back),
   only below the high watermark on a replicated queue's leader.
2. `_durable` (durable under the queue's fsync policy): a single node
   confirms now; a replicated leader's publish waits (`WaitingConfirms`).

The high watermark moves in the gate, on this leader's own fsync
(`persisted`, called from `_durable`) or on a follower's fetch or an in-sync
change (`ReplicationGate.moved`, from the feed). The gate only says what a
move lets go (a `Release`); this pipeline applies it in one step, `release`:
the held messages below the high watermark become ready, then the waiting
confirms of publishes that end at or below it resolve: confirmed, or nacked
(`NotEnoughReplicas`) when the in-sync set is smaller than the queue needs.
A fenced gate fails every waiting confirm (`abandon`).

Invariants: a confirm resolves only once its write is durable here and,
replicated, once the high watermark has passed it (replicated confirms in
the order their writes became durable); a message is ready only once
written and, replicated, below the high watermark, in offset order.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from logbroker.message import Message, records_of
from logbroker.queue.commit_port import CommitPort
from logbroker.queue.effects import Effect
from logbroker.queue.held_messages import HeldMessages
from logbroker.queue.message_meta import MetaRun, metas_of
from logbroker.queue.publish_refusals import PublishRefusals
from logbroker.queue.queue_core import QueueCore
from logbroker.queue.queue_limits import Admission
from logbroker.queue.queue_settings import QueueSettings
from logbroker.queue.record_cache import RecordCache
from logbroker.queue.replication_gate import (
    GateFenced,
    NotEnoughReplicas,
    Release,
    ReplicationGate,
)
from logbroker.queue.waiting_confirms import WaitingConfirms
from segments.clock import Clock
from segments.log import AppendResult
from segments.record_batch import Record

__all__ = ["AppendPipeline", "Confirm", "MadeReady"]

# The shell's side: run the core's effects, then note that `count` messages became ready.
MadeReady = Callable[[list[Effect], int], None]


class Confirm(Protocol):
    """Where a publish's outcome goes: its base offset once it may be confirmed, or why
    not. An `asyncio.Future[int]` is one (the shell's asyncio edge passes its future);
    the simulation passes its client's confirm."""

    def done(self) -> bool: ...

    def set_result(self, base_offset: int, /) -> None: ...

    def set_exception(self, error: BaseException, /) -> None: ...


@dataclass(eq=False, slots=True)
class _Append:
    """One `append_many` on its way through the pipeline (its records and metas go only
    to `_written`: they are not kept while the write waits for its fsync)."""

    count: int
    total_bytes: int
    confirm: Confirm
    admitted: bool = True  # counts against the length limit until written


class AppendPipeline:
    def __init__(
        self, settings: Callable[[], QueueSettings], core: QueueCore,
        committer: CommitPort[Sequence[Record], AppendResult], records: RecordCache,
        held: HeldMessages, clock: Clock, made_ready: MadeReady,
    ) -> None:
        self._settings = settings  # read at each use: a policy change replaces them
        self._core = core
        self._committer = committer
        self._records = records
        self._held = held
        self._clock = clock
        self._made_ready = made_ready
        self.gate: ReplicationGate | None = None
        self._name = settings().name
        self.refusals = PublishRefusals(self._name, clock)
        # (the publish's base offset, which its confirm gives; the confirm)
        self._confirms: WaitingConfirms[tuple[int, Confirm]] = WaitingConfirms()

    def replicate(self, gate: ReplicationGate) -> None:
        """This queue leads a replicated queue: readiness and confirms wait for `gate`."""
        self.gate = gate
        gate.listener = self

    # ------------------------------------------------------------- admission

    def admit(self, message: Message) -> Admission:
        """Admit a publish; an accepted one must be followed by `append(message)`, and
        counts against the length limit until written."""
        refusal = self.gate.publish_refusal() if self.gate is not None else None
        if refusal is not None:
            self.refusals.refused(f"queue '{self._name}' refused it: {refusal}", log=True)
            return Admission.REJECT
        admission = self._core.admit(message.size_bytes)
        if admission is not Admission.ACCEPT:
            self.refusals.refused(f"queue '{self._name}' is full "
                                  f"(x-overflow {self._core.limits.overflow.value})")
        return admission

    def admit_many(self, messages: Sequence[Message]) -> list[Admission] | None:
        """`admit` for each of `messages` in order; None when all are accepted (a queue
        without reject-publish limits: the usual case, decided once for the batch)."""
        if ((self.gate is None or self.gate.publish_refusal() is None)
                and self._core.admit_all([m.size_bytes for m in messages])):
            return None
        return [self.admit(message) for message in messages]

    # ---------------------------------------------------------------- append

    def append_many(self, messages: Sequence[Message], confirm: Confirm) -> None:
        """Send admitted messages to the log now, as one write; `confirm` gets the first
        message's offset once the publish may be confirmed."""
        settings = self._settings()
        metas = metas_of(messages, settings.message_ttl_ms, self._clock.wall_ms())
        # A transient message, or any message in a transient queue, is not lost to a
        # crash it could survive anyway: it is confirmed once written.
        durable = settings.durable and any(m.persistent for m in messages)
        append = _Append(len(messages), sum(metas.sizes), confirm)
        try:
            records = records_of(messages)
            self._committer.append(
                records, durable, functools.partial(self._written, append, metas, records),
                functools.partial(self._durable, append),
                functools.partial(self._failed, append))
        except Exception:
            self._no_longer_admitted(append)
            raise

    def _written(self, append: _Append, metas: MetaRun, records: Sequence[Record],
                 result: AppendResult) -> None:
        append.admitted = False
        self._core.admitted_written(append.count, append.total_bytes)
        if self._core.consumer_count:  # likely delivered at once: spare the read-back
            self._records.wrote(result.base_offset, records)
        limit = None
        if self.gate is not None:
            self.gate.wrote(result.next_offset)
            limit = self.gate.high_watermark
        try:
            count, effects = self._held.written(self._core, result.base_offset, metas, limit)
            if count:
                self._made_ready(effects, count)
        except Exception as error:  # a broken invariant must fail the publish
            if not append.confirm.done():
                append.confirm.set_exception(error)

    def _durable(self, append: _Append, result: AppendResult) -> None:
        if append.admitted:  # never written: it cannot count any more
            self._no_longer_admitted(append)
        if append.confirm.done():
            return
        if self.gate is None:
            append.confirm.set_result(result.base_offset)
        else:
            self._durable_on_leader(self.gate, append.confirm, result)

    def _failed(self, append: _Append, error: BaseException) -> None:
        """The write or its sync failed: the publish is not confirmed."""
        self._no_longer_admitted(append)
        if not append.confirm.done():
            append.confirm.set_exception(error)

    def _durable_on_leader(self, gate: ReplicationGate, confirm: Confirm,
                           result: AppendResult) -> None:
        """A replicated leader's write is durable here: the confirm waits for the high
        watermark, which this leader's own copy may just have moved."""
        release = gate.persisted(result.next_offset)
        if gate.fenced is not None:
            confirm.set_exception(GateFenced(gate.fenced))
        else:
            self._confirms.add(result.next_offset, (result.base_offset, confirm))
        self.release(release)

    def _no_longer_admitted(self, append: _Append) -> None:
        if append.admitted:
            append.admitted = False
            self._core.admitted_written(append.count, append.total_bytes)

    # ------------------------------------------------ the gate's releases

    def release(self, release: Release) -> None:
        """Apply what the gate let go: messages below its high watermark become ready (in
        offset order), then the confirms it passed resolve (in the order they came)."""
        count, effects = self._held.release(self._core, release.high_watermark)
        if count:
            self._made_ready(effects, count)
        for base_offset, confirm in self._confirms.passed(release.high_watermark):
            if confirm.done():
                continue
            if release.refusal is None:
                confirm.set_result(base_offset)
            else:
                confirm.set_exception(NotEnoughReplicas(release.refusal))

    def abandon(self, reason: str) -> None:
        """The gate is fenced: nothing waiting here will be confirmed."""
        for _, confirm in self._confirms.take_all():
            if not confirm.done():
                confirm.set_exception(GateFenced(reason))
