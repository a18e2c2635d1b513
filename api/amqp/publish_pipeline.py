"""The publishes of one channel: started in order, answered in order.

Theory of operation
-------------------
A basic.publish must not hold up reading the connection (the next frames may
be acks that free a consumer, or more publishes to batch into one fsync), so
publishes are not awaited where they are read. The publishes a channel
receives in one socket read form a batch, started once the read's frames are
handled (``after_read``): ``publisher.start_batch`` routes each message,
admits it to its queues and submits each queue's share to its group committer
during the call, and gives a future that resolves when all are durable. One
log submit per queue per batch instead of per message is what lets a
confirming publisher go at the disk's pace. Batches start in the order they
were opened, so the routing and appending of a channel's messages keep
publish order, and one queue's log receives them in that order.

Their *answers* must keep that order too: publisher confirms carry delivery
tags 1, 2, 3, ... in publish order, and a mandatory message's basic.return has
to reach the client before its confirm. So every publish is an entry of an
:class:`~api.ordered_answers.OrderedAnswers`; when any batch finishes, one
pass (scheduled once, however many finished) takes the finished entries from
the head and

* sends basic.return (312 NO_ROUTE) for an unroutable mandatory message,
* collects confirms, and sends each run of consecutive acks (or nacks) as one
  frame with ``multiple=True``: every earlier tag is already answered, so
  "all up to N" means exactly this run.

A *barrier* entry (tx.commit) runs its callback once every publish before it
has been answered, telling it whether all of those since the previous barrier
were confirmed (a transaction with a refused publish fails as a whole). A
publish that fails inside the broker (a queue closed under it, a disk error)
is nacked: the client must not count it as stored.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass

from pamqp import commands

from api.amqp.connection_context import IN_FLIGHT_UNIT, ConnectionContext
from api.amqp.direct_reply import DirectReplyRegistry
from api.amqp.frame_encoding import build_method
from api.ordered_answers import OrderedAnswers
from logbroker.message import Message
from logbroker.message_stats import ChannelCounters
from logbroker.publishing import PublishResult
from logbroker.queue.replication_gate import ConfirmRefused

__all__ = ["PublishPipeline"]

logger = logging.getLogger(__name__)

NO_ROUTE = 312


MAX_BATCH = 256  # publishes per batch: bounds the work of one task step


@dataclass(slots=True)
class _Batch:
    messages: list[Message]
    size_bytes: int = 0
    task: asyncio.Future[list[PublishResult]] | None = None  # None until started

    def outcome(self, index: int) -> PublishResult:
        task = self.task
        if task is None or task.cancelled() or task.exception() is not None:
            return PublishResult(routed=True, confirmed=False)
        return task.result()[index]


@dataclass(slots=True)
class _Entry:
    seq: int  # the confirm's delivery tag; 0 when the channel is not in confirm mode
    message: Message | None
    mandatory: bool
    batch: _Batch | None  # None: answered already (`answer`) or a barrier
    index: int = 0
    answer: PublishResult | None = None
    barrier: Callable[[bool], None] | None = None
    generation: int = 0  # barriers passed before this entry was submitted

    def is_ready(self) -> bool:
        if self.batch is None:
            return True
        return self.batch.task is not None and self.batch.task.done()

    def outcome(self) -> PublishResult:
        if self.batch is not None:
            return self.batch.outcome(self.index)
        assert self.answer is not None
        return self.answer


class PublishPipeline:
    """Ordered publishes, returns and confirms of channel ``channel``."""

    def __init__(self, ctx: ConnectionContext, channel: int,
                 counters: ChannelCounters | None = None) -> None:
        self._ctx = ctx
        self._channel = channel
        self._counters = counters or ChannelCounters()  # the channel's (management API)
        self._answers = OrderedAnswers(_Entry.is_ready, self._answer, self._end_of_pass)
        self._confirms: list[tuple[int, bool]] = []  # gathered during one pass
        self.confirming = False
        self._next_seq = 1
        self._open: _Batch | None = None  # publishes of this loop iteration, not started
        # Publishes between two barriers share a generation; the last one refused:
        self._generation = 0
        self._refused_generation = -1

    @property
    def pending(self) -> int:
        """Entries not answered yet."""
        return len(self._answers)

    def submit(self, message: Message, mandatory: bool) -> None:
        """Start publishing ``message``; its answers go out in publish order."""
        seq = 0
        if self.confirming:
            seq = self._next_seq
            self._next_seq += 1
        if DirectReplyRegistry.is_reply(message.exchange, message.routing_key):
            # A direct reply-to reply goes straight to its requester: answered at once.
            self._start_batch()  # earlier publishes keep their place in line
            answer = PublishResult(self._ctx.direct_reply.route(message), True)
            self._answers.append(_Entry(seq, message, mandatory, None, answer=answer,
                                        generation=self._generation))
            self._answers.changed()
            return
        size = len(message.body)
        self._ctx.flow.add(IN_FLIGHT_UNIT, size)
        batch = self._open
        if batch is None:
            batch = self._open = _Batch([])
            self._ctx.after_read(self._start_batch)
        batch.messages.append(message)
        batch.size_bytes += size
        self._answers.append(_Entry(seq, message, mandatory, batch, len(batch.messages) - 1,
                                    generation=self._generation))
        if len(batch.messages) >= MAX_BATCH:
            self._start_batch()

    def _start_batch(self) -> None:
        batch, self._open = self._open, None
        if batch is None or batch.task is not None:
            return
        session = self._ctx.session
        batch.task = self._ctx.broker.publisher.start_batch(
            session.vhost, batch.messages, self._ctx.flow.holds, session.connection_id)
        batch.task.add_done_callback(functools.partial(self._finished, batch.size_bytes))

    def barrier(self, callback: Callable[[bool], None]) -> None:
        """Call ``callback`` once every publish submitted so far has been answered, with
        whether every one since the previous barrier was confirmed."""
        self._start_batch()
        self._answers.append(_Entry(0, None, False, None, barrier=callback,
                                    generation=self._generation))
        self._generation += 1
        self._answers.changed()

    def close(self) -> None:
        """The channel is gone: publishes still complete in the broker, unanswered."""
        self._answers.close()

    def _finished(self, size: int, task: asyncio.Future[list[PublishResult]]) -> None:
        self._ctx.flow.remove(IN_FLIGHT_UNIT, size)
        if not task.cancelled() and (error := task.exception()) is not None:
            # Logged here, not when answered: a closed channel never answers.
            if isinstance(error, ConfirmRefused):  # a fenced leader, too few replicas
                logger.info("publish not confirmed (nacked): %s", error)
            else:
                logger.error("publish failed in the broker", exc_info=error)
        self._answers.changed()

    def _answer(self, entry: _Entry) -> None:
        """Answer one entry, in publish order: its return, its confirm (gathered)."""
        if entry.barrier is not None:
            self._send_confirms()
            entry.barrier(self._refused_generation != entry.generation)
            return
        assert entry.message is not None
        result = entry.outcome()
        if not result.confirmed:
            self._refused_generation = entry.generation
        if entry.mandatory and not result.routed:
            self._send_return(entry.message)
        if entry.seq:
            self._confirms.append((entry.seq, result.confirmed))

    def _end_of_pass(self) -> None:
        self._send_confirms()
        self._ctx.notify_output()

    def _send_return(self, message: Message) -> None:
        method = build_method(commands.Basic.Return, reply_code=NO_ROUTE, reply_text="NO_ROUTE",
                              exchange=message.exchange, routing_key=message.routing_key)
        self._ctx.machine.send_content(self._channel, method, message.encoded_properties(),
                                       message.body)
        self._ctx.broker.publisher.stats.return_unroutable += 1
        self._counters.return_unroutable += 1

    def _send_confirms(self) -> None:
        """The gathered confirms, one frame per run of acks (or nacks): every earlier
        tag is answered already, so "multiple" means exactly the run."""
        confirms, self._confirms = self._confirms, []
        start = 0
        while start < len(confirms):
            ack = confirms[start][1]
            end = start
            while end + 1 < len(confirms) and confirms[end + 1][1] == ack:
                end += 1
            tag, multiple = confirms[end][0], end > start
            method: commands.Basic.Ack | commands.Basic.Nack = (
                commands.Basic.Ack(tag, multiple)
                if ack
                else commands.Basic.Nack(tag, multiple, requeue=False)
            )
            self._ctx.machine.send_method(self._channel, method)
            if ack:
                self._ctx.broker.publisher.stats.confirm += end - start + 1
                self._counters.confirm += end - start + 1
            start = end + 1

