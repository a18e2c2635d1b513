"""The queue: a pure state machine over the offsets of one queue log.

Theory of operation. Messages live in the queue's segment log; the core only
decides. Every message is in exactly one of three states:

- ready: waiting for a consumer (`ReadySet`);
- unacked: delivered to a channel and not yet settled (`_unacked`);
- settled: acked, rejected, expired, dropped or dead-lettered; the shell
  records it in the cursor log (`Settle`) and never hands it out again.

Calls take the time (`now_ms`) as an argument and return effects, which the
shell carries out in order (effects.py): dead-lettering before settling, so
no message is lost between the two. The core never touches a file, a socket
or a clock, which is what lets the simulation replay it from a seed.

RabbitMQ semantics kept here:
- delivery order is the log order (FIFO), or priority then log order with
  `x-max-priority`; a requeued message goes back to its original place;
- `redelivered` is set on anything that was (or, after a restart, may have
  been) delivered before; a delivery handed back as never having reached a
  client (`return_undelivered`: a forwarding node buffered it) does not count;
- message TTL is checked at the head of the queue, as RabbitMQ does; an
  expired message is dead-lettered (`expired`) or dropped;
- `x-max-length` / `x-max-length-bytes` count ready messages; `drop-head`
  drops (or dead-letters, `maxlen`) from the front, `reject-publish(-dlx)`
  refuses the publish before it is written (`admit`): `LengthLimit` decides;
- `x-expires` deletes a queue that had no consumer, no get and no redeclare
  for that long.

A publish enters in two steps: `admit` (before it is written; it counts
against the length limit from then on) and, once written, `enqueue` (or
`enqueue_many` for a written batch), in offset order, which makes it ready;
`admitted_written` says an admitted publish is written (or failed).

Invariants: ready, unacked and settled are disjoint; `ready_bytes` is the
sum of the sizes of ready messages; a consumer's `unacked` equals the number
of unacked entries it owns (while it exists).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from logbroker.queue.consumers import Consumer, ConsumerRoster
from logbroker.queue.effects import (
    DeadLetter,
    DeadLetterReason,
    Deliver,
    Effect,
    QueueExpired,
    with_settles,
)
from logbroker.queue.length_limit import LengthLimit
from logbroker.queue.message_meta import (
    NO_EXPIRY,
    MessageMeta,
    MessageMetaTable,
    MetaColumns,
    MetaRun,
)
from logbroker.queue.queue_limits import Admission, QueueLimits
from logbroker.queue.ready_set import FifoReadySet, PriorityReadySet


class ConsumerRefused(Exception):
    """basic.consume is refused; `reply_code` is the AMQP code (403 for exclusivity)."""

    def __init__(self, reply_code: int, text: str) -> None:
        super().__init__(text)
        self.reply_code = reply_code
        self.text = text


@dataclass(frozen=True, slots=True)
class _Unacked:
    channel_key: str
    consumer_tag: str | None
    redelivered: bool  # the flag this delivery carried


class QueueCore:
    def __init__(
        self,
        limits: QueueLimits,
        *,
        max_priority: int | None = None,
        single_active_consumer: bool = False,
        next_offset: int = 0,
        now_ms: int = 0,
    ) -> None:
        self.limits = limits  # also the length limit's; `set_limits` changes both
        self.length = LengthLimit(limits)
        self.max_priority = max_priority
        self._ready: FifoReadySet | PriorityReadySet
        if max_priority is None:
            self._ready = FifoReadySet(next_offset)
        else:
            self._ready = PriorityReadySet(max_priority)
        self._meta = MessageMetaTable(next_offset)
        self.next_offset = next_offset
        self.roster = ConsumerRoster(single_active_consumer)
        self._unacked: dict[int, _Unacked] = {}
        self._delivered_before: set[int] = set()
        # Offsets below it may have been delivered before a restart (recover): once
        # one is settled it never comes back, so the range needs no set.
        self._redelivered_below = 0
        self.ready_bytes = 0
        self._last_used_ms = now_ms
        self._expired = False

    @classmethod
    def recover(
        cls,
        limits: QueueLimits,
        *,
        ack_floor: int,
        next_offset: int,
        acked: Iterable[tuple[int, int]],
        metas: MetaColumns | Iterable[MessageMeta],
        delivered_below: int,
        max_priority: int | None = None,
        single_active_consumer: bool = False,
        now_ms: int = 0,
    ) -> QueueCore:
        """Rebuild from the log and cursor log after a restart.

        `metas` gives one entry per offset in `[ack_floor, next_offset)`, acked
        ones included; offsets below `delivered_below` that are not acked may
        have been delivered before the restart and come back redelivered.

        A FIFO queue is rebuilt column by column, never message by message: its
        never-delivered tail needs no memory in the ready set, and the messages
        that may have been delivered are a range (`_redelivered_below`), so a
        restart costs the same whatever the backlog (issue 28).
        """
        core = cls(limits, max_priority=max_priority,
                   single_active_consumer=single_active_consumer,
                   next_offset=ack_floor, now_ms=now_ms)
        columns = metas if isinstance(metas, MetaColumns) else MetaColumns.of(metas)
        if len(columns) != next_offset - ack_floor:
            raise ValueError(f"{len(columns)} metas for the {next_offset - ack_floor} "
                             f"offsets [{ack_floor}, {next_offset})")
        core._meta.extend_columns(ack_floor, columns)
        acked_ranges = _clipped(acked, ack_floor, next_offset)
        unacked = _gaps(acked_ranges, ack_floor, next_offset)
        core._redelivered_below = min(delivered_below, next_offset)
        sizes = columns.sizes
        core.ready_bytes = sum(sizes) if unacked == [(ack_floor, next_offset)] else sum(
            sum(sizes[lo - ack_floor:hi - ack_floor]) for lo, hi in unacked)
        if isinstance(core._ready, FifoReadySet):
            # Past the last acked range nothing was settled, so the scan starts there;
            # the unacked gaps below it go in the returned heap (a sorted list is one).
            scan_start = unacked[-1][0] if unacked and unacked[-1][1] == next_offset \
                else next_offset
            core._ready = FifoReadySet(scan_start)
            core._ready.next_offset = next_offset
            core._ready.returned_sorted(
                [o for lo, hi in unacked if lo < scan_start for o in range(lo, hi)])
        else:
            priorities = columns.priorities
            for lo, hi in unacked:
                core._ready.add_ascending(lo, priorities[lo - ack_floor:hi - ack_floor])
        core.next_offset = next_offset
        return core

    # ----------------------------------------------------------------- counts

    @property
    def message_count(self) -> int:
        """Ready messages, as queue.declare-ok and basic.get-ok report them."""
        return len(self._ready)

    @property
    def unacked_count(self) -> int:
        return len(self._unacked)

    @property
    def consumer_count(self) -> int:
        return len(self.roster)

    def expires_at_ms(self, offset: int) -> int:
        return self._meta.expires_at_ms(offset)

    # ---------------------------------------------------------------- intake

    def admit(self, size_bytes: int) -> Admission:
        """Whether a publish of `size_bytes` may be written (reject-publish limits); an
        accepted one counts against them until `admitted_written`."""
        return self.length.admit(size_bytes, len(self._ready), self.ready_bytes)

    def admit_all(self, sizes: Sequence[int]) -> bool:
        """Admit a whole batch at once if no limit can refuse any of it (else False:
        `admit` each in turn)."""
        return self.length.admit_all(sizes)

    def admitted_written(self, count: int, total_bytes: int) -> None:
        """`count` admitted publishes of `total_bytes` are written (or failed to be)."""
        self.length.written(count, total_bytes)

    def enqueue(self, offset: int, meta: MessageMeta, delivered_before: bool = False
                ) -> list[Effect]:
        """The message at `offset` is in the log: make it ready (and enforce drop-head).

        `delivered_before`: it may have been delivered already (by a replicated queue's
        previous leader), so it goes out flagged redelivered."""
        self._meta.append(offset, meta)
        if delivered_before:
            self._delivered_before.add(offset)
        self._ready.add_new(offset, meta.priority)
        self.next_offset = offset + 1
        self.ready_bytes += meta.size_bytes
        return self._enforce_length()

    def enqueue_many(self, first_offset: int, run: MetaRun, delivered_below: int = 0
                     ) -> list[Effect]:
        """`enqueue` for the consecutive offsets from `first_offset` (one written batch);
        those below `delivered_below` may have been delivered before."""
        if self.length.drops_per_message:
            return [effect for index, meta in enumerate(run) for effect in self.enqueue(
                first_offset + index, meta, first_offset + index < delivered_below)]
        self._meta.extend(first_offset, run)
        self._ready.add_new_run(first_offset, run.priorities)
        end = first_offset + len(run)
        self._delivered_before.update(range(first_offset, min(end, delivered_below)))
        self.next_offset = end
        self.ready_bytes += sum(run.sizes)
        return []

    def set_limits(self, limits: QueueLimits) -> list[Effect]:
        """A policy changed: apply the new limits to the messages already queued."""
        self.limits = limits
        self.length.set_limits(limits)
        return self._enforce_length()

    def _enforce_length(self) -> list[Effect]:
        if not self.length.over(len(self._ready), self.ready_bytes):
            return []  # the usual case, once per message made ready
        effects: list[Effect] = []
        settled: list[int] = []
        while self.length.over(len(self._ready), self.ready_bytes):
            self._discard(self._take_ready(), DeadLetterReason.MAXLEN, effects, settled)
        return with_settles(effects, settled)

    # ------------------------------------------------------------- consumers

    def add_consumer(self, consumer: Consumer, now_ms: int) -> None:
        if consumer.tag in self.roster:
            raise ConsumerRefused(
                530, f"NOT_ALLOWED - attempt to reuse consumer tag '{consumer.tag}'"
            )
        if self.roster.has_exclusive() or (consumer.exclusive and len(self.roster)):
            raise ConsumerRefused(403, "ACCESS_REFUSED - queue in exclusive use")
        self.roster.add(consumer)
        self._last_used_ms = now_ms

    def remove_consumer(self, tag: str, now_ms: int) -> Consumer | None:
        """basic.cancel: the consumer's unacked messages stay with its channel."""
        self._last_used_ms = now_ms
        return self.roster.remove(tag)

    def touch(self, now_ms: int) -> None:
        """A redeclare or get: the queue counts as used for x-expires."""
        self._last_used_ms = now_ms

    # -------------------------------------------------------------- delivery

    def pump(self, now_ms: int, channel_credit: Mapping[str, int] | None = None) -> list[Effect]:
        """Expire what is due at the head, then deliver to consumers with capacity."""
        credit = dict(channel_credit or {})
        effects: list[Effect] = []
        settled: list[int] = []
        while self._expire_head(now_ms, effects, settled) is not None:
            consumer = self.roster.pick(credit)
            if consumer is None:
                break
            offset = self._take_ready()
            effects.append(self._deliver(offset, consumer.channel_key, consumer.tag,
                                         consumer.no_ack, settled))
            if not consumer.no_ack:
                consumer.unacked += 1
            if consumer.channel_key in credit:
                credit[consumer.channel_key] -= 1
            self.roster.delivered_to(consumer)
        return with_settles(effects, settled)

    def get(self, channel_key: str, no_ack: bool, now_ms: int) -> list[Effect]:
        """basic.get: the next ready message (a `Deliver` with no consumer tag) or nothing."""
        self._last_used_ms = now_ms
        effects: list[Effect] = []
        settled: list[int] = []
        if self._expire_head(now_ms, effects, settled) is not None:
            effects.append(self._deliver(self._take_ready(), channel_key, None, no_ack, settled))
        return with_settles(effects, settled)

    def _deliver(
        self, offset: int, channel_key: str, tag: str | None, no_ack: bool, settled: list[int]
    ) -> Deliver:
        redelivered = offset < self._redelivered_below or offset in self._delivered_before
        if no_ack:
            self._delivered_before.discard(offset)
            settled.append(offset)
        else:
            self._unacked[offset] = _Unacked(channel_key, tag, redelivered)
            self._delivered_before.add(offset)
        return Deliver(offset, tag, channel_key, redelivered, no_ack)

    def _expire_head(self, now_ms: int, effects: list[Effect], settled: list[int]) -> int | None:
        """Discard expired messages at the head; return the head left (None: empty)."""
        while (head := self._ready.peek()) is not None and self._is_expired(head, now_ms):
            self._discard(self._take_ready(), DeadLetterReason.EXPIRED, effects, settled)
        return head

    def _is_expired(self, offset: int, now_ms: int) -> bool:
        expires_at = self._meta.expires_at_ms(offset)
        return expires_at != NO_EXPIRY and now_ms > expires_at

    def _take_ready(self) -> int:
        offset = self._ready.pop()
        self.ready_bytes -= self._meta.size_bytes(offset)
        return offset

    def _discard(
        self, offset: int, reason: DeadLetterReason, effects: list[Effect], settled: list[int]
    ) -> None:
        self._delivered_before.discard(offset)
        if self.limits.dead_letter:
            effects.append(DeadLetter(offset, reason))
        settled.append(offset)

    # ------------------------------------------------------------ settlement

    def ack(self, offsets: Iterable[int]) -> list[Effect]:
        settled = [offset for offset in offsets if self._release(offset)]
        for offset in settled:
            self._delivered_before.discard(offset)
        return with_settles([], settled)

    def reject(self, offsets: Iterable[int], requeue: bool) -> list[Effect]:
        """basic.reject / basic.nack: back to the queue, or dead-lettered / dropped."""
        effects: list[Effect] = []
        settled: list[int] = []
        for offset in sorted(offsets):
            if not self._release(offset):
                continue
            if requeue:
                self._return(offset)
            else:
                self._discard(offset, DeadLetterReason.REJECTED, effects, settled)
        # A requeue can push a drop-head queue over its limit; like RabbitMQ
        # (requeue_and_run -> maybe_drop_head), the head makes room.
        return with_settles(effects, settled) + self._enforce_length()

    def return_undelivered(self, offsets: Iterable[int], channel_key: str,
                           consumer_tag: str) -> None:
        """Deliveries to `consumer_tag` on `channel_key` that never reached a client.

        A forwarding node buffered them and gives them back (its consumer went, or
        one expired while it waited there). Each goes back to its place, flagged
        redelivered next time only if this delivery was: a message nobody saw was
        not delivered. Offsets not unacked by that consumer and channel are left
        alone. Nothing is settled, so no effects (and, as with a requeue, no length
        limit applies).
        """
        for offset in sorted(offsets):
            owner = self._unacked.get(offset)
            if owner is None or (owner.channel_key, owner.consumer_tag) != (channel_key,
                                                                            consumer_tag):
                continue
            self._release(offset)
            if not owner.redelivered:
                self._delivered_before.discard(offset)
            self._return(offset)

    def requeue_channel(self, channel_key: str) -> list[Effect]:
        """The channel closed (or basic.recover): its unacked messages become ready."""
        return self.reject(self.unacked_of(channel_key), requeue=True)

    def unacked_of(self, channel_key: str) -> list[int]:
        return sorted(o for o, owner in self._unacked.items() if owner.channel_key == channel_key)

    def held_by_channels(self, offsets: Iterable[int], channel_key_prefix: str) -> list[int]:
        """Those of `offsets` unacked on a channel whose key starts with the prefix (the
        channels another node forwards here): a settle from that node counts for them
        only, never for a delivery the message went to after its channel let it go."""
        unacked = self._unacked
        return [offset for offset in offsets
                if (owner := unacked.get(offset)) is not None
                and owner.channel_key.startswith(channel_key_prefix)]

    def _release(self, offset: int) -> bool:
        owner = self._unacked.pop(offset, None)
        if owner is None:
            return False
        if owner.consumer_tag is not None:
            consumer = self.roster.get(owner.consumer_tag)
            if consumer is not None and consumer.channel_key == owner.channel_key:
                consumer.unacked -= 1
        return True

    def _return(self, offset: int) -> None:
        self._ready.add_returned(offset, self._meta.priority(offset))
        self.ready_bytes += self._meta.size_bytes(offset)

    def purge(self) -> tuple[int, list[Effect]]:
        """Remove every ready message (unacked ones stay); returns how many."""
        taken = self._ready.take_all()
        for offset in taken:
            self._delivered_before.discard(offset)
        self.ready_bytes = 0
        return len(taken), with_settles([], taken)

    # ------------------------------------------------------------------ time

    def tick(self, now_ms: int) -> list[Effect]:
        """Expire messages at the head and, if unused for `x-expires`, the queue itself."""
        effects: list[Effect] = []
        settled: list[int] = []
        self._expire_head(now_ms, effects, settled)
        effects = with_settles(effects, settled)
        expires = self.limits.expires_ms
        if (expires is not None and not self._expired and not len(self.roster)
                and now_ms - self._last_used_ms >= expires):
            self._expired = True
            effects.append(QueueExpired())
        return effects

    def next_deadline_ms(self) -> int | None:
        """When `tick` next has something to do (None: nothing scheduled)."""
        deadlines = []
        head = self._ready.peek()
        if head is not None and self._meta.expires_at_ms(head) != NO_EXPIRY:
            deadlines.append(self._meta.expires_at_ms(head) + 1)
        if self.limits.expires_ms is not None and not len(self.roster) and not self._expired:
            deadlines.append(self._last_used_ms + self.limits.expires_ms)
        return min(deadlines) if deadlines else None

    def forget_below(self, ack_floor: int) -> None:
        """The cursor's ack floor moved: metadata below it is no longer needed."""
        self._meta.forget_below(ack_floor)



def _clipped(ranges: Iterable[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    """`ranges` (half-open) cut to [lo, hi), sorted, empty ones dropped."""
    return [(max(a, lo), min(b, hi)) for a, b in sorted(ranges) if min(b, hi) > max(a, lo)]


def _gaps(ranges: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    """The parts of [lo, hi) that sorted, disjoint `ranges` inside it do not cover."""
    gaps: list[tuple[int, int]] = []
    position = lo
    for a, b in ranges:
        if a > position:
            gaps.append((position, a))
        position = max(position, b)
    if position < hi:
        gaps.append((position, hi))
    return gaps
