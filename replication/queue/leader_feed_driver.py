"""`LeaderFeedDriver`: the leader side of queue replication on a node, a `LeaderFeed` core
run over ports.

Theory of operation. Synchronous and without I/O of its own, like the
follower's driver: a fetch comes in (`fetch`, with a `reply` callback that
the transport answers the follower through); the driver asks the core what
to do with it, with the clock's monotonic and wall time, and does it:
answer at once, read the stream from the queue's log up to the leader's
durable end (`stream_batches`, at most `bytes_max`, the queue's sync batch
size in records) and answer it, or park the fetch on the queue
(`LedQueue.park`) and judge it again when the queue changes or its deadline
comes. Every `in_sync_every_ms` (a timer) it asks the core for in-sync
proposals and hands them to the `InSyncProposer` port (the metadata log),
whose answer goes back to the core.

Ports: `FeedQueues` (the queues led here, as `LedQueue`s), `InSyncProposer`,
`Timers` and the `Clock`. The asyncio shell (logbroker/cluster/replica_feed.py)
and the deterministic simulation (tests/sim) differ only in those.

Invariant: every fetch handed to `fetch` gets exactly one `reply`, unless the
driver is stopped first (a stopping node answers nothing more).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from replication.queue.fetch_protocol import FetchAnswer, FetchRequest, StreamAnswer
from replication.queue.leader_feed import (
    AnswerNow,
    FedQueue,
    Key,
    LeaderFeed,
    Park,
    ProposeInSync,
    StreamFrom,
)
from replication.queue.replication_leader import Refuse
from replication.queue.stream_batches import stream_batches
from replication.queue.timers import TimerHandle, Timers
from segments.clock import Clock
from segments.log import Log

logger = logging.getLogger(__name__)
Reply = Callable[[FetchAnswer], None]


@dataclass(frozen=True, slots=True)
class FeedTiming:
    wait_ms: int = 1_000  # a caught-up follower's long poll
    bytes_max: int = 1 << 20  # per answer, about
    in_sync_every_ms: int = 250


class LedQueue(FedQueue, Protocol):
    """A queue led here: what the core judges, and what the driver reads and waits on."""

    @property
    def log(self) -> Log: ...

    @property
    def sync_batch_size(self) -> int: ...

    def acked_ranges(self) -> Sequence[tuple[int, int]]: ...

    def park(self, deadline_ms: int, wake: Callable[[], None]) -> None:
        """Call `wake` once: when the queue changes (records, acks, watermark, fencing)
        or at `deadline_ms`, whichever comes first."""


class FeedQueues(Protocol):
    def led(self, key: Key) -> LedQueue | None:
        """The queue, if this node leads it and it is open (None: refuse the fetch)."""

    def all_led(self) -> Sequence[tuple[Key, LedQueue]]: ...


class InSyncProposer(Protocol):
    def propose_in_sync(self, proposal: ProposeInSync, done: Callable[[bool], None]) -> None:
        """Propose `SetQueueInSync`; `done(True)` once committed (or it held already),
        `done(False)` when its outcome is not known."""


class LeaderFeedDriver:
    def __init__(self, node: str, queues: FeedQueues, proposer: InSyncProposer,
                 timers: Timers, clock: Clock, timing: FeedTiming | None = None,
                 stats: Counter[str] | None = None) -> None:
        self.timing = timing or FeedTiming()
        self.core = LeaderFeed(node, self.timing.wait_ms)
        self._queues = queues
        self._proposer = proposer
        self._timers = timers
        self._clock = clock
        self._ticker: TimerHandle | None = None
        self._running = False
        self.stats: Counter[str] = Counter() if stats is None else stats

    def start(self) -> None:
        self._running = True
        self._arm()

    def stop(self) -> None:
        self._running = False
        if self._ticker is not None:
            self._ticker.cancel()

    # ------------------------------------------------------------------ fetch

    def fetch(self, peer: str, key: Key, request: FetchRequest, reply: Reply) -> None:
        """A follower's fetch: answered now, or parked for at most the long poll."""
        deadline = self.core.deadline(self._clock.monotonic_ms())
        self._serve(peer, key, request, deadline, reply)

    def _serve(self, peer: str, key: Key, request: FetchRequest, deadline_ms: int,
               reply: Reply) -> None:
        queue = self._queues.led(key)
        decision = self.core.on_fetch(peer, key, request, queue,
                                      self._clock.monotonic_ms(), deadline_ms,
                                      self._clock.wall_ms())
        if isinstance(decision, AnswerNow):
            reply(decision.answer)
            return
        assert queue is not None
        if isinstance(decision, StreamFrom):
            reply(_stream(queue, decision, self.timing.bytes_max))
            return
        assert isinstance(decision, Park)
        queue.park(decision.deadline_ms, partial(self._woken, peer, key, request,
                                                 deadline_ms, reply))

    def _woken(self, peer: str, key: Key, request: FetchRequest, deadline_ms: int,
               reply: Reply) -> None:
        """A parked fetch's queue changed, or its deadline came: judge it again."""
        try:
            self._serve(peer, key, request, deadline_ms, reply)
        except Exception as error:  # answered all the same: the follower must not hang
            logger.exception("fetch of queue %r from %s failed", key[1], peer)
            reply(Refuse(f"internal error: {error}"))

    # ---------------------------------------------------------------- in sync

    def _arm(self) -> None:
        if self._running:
            at = self._clock.monotonic_ms() + self.timing.in_sync_every_ms
            self._ticker = self._timers.call_at(at, self.tick)

    def tick(self) -> None:
        """Propose the in-sync changes the queues led here want (then again later)."""
        try:
            for key, queue, proposal in self._proposals():
                logger.info("queue %r: in-sync replicas %s -> %s", key[1],
                            list(queue.leader.in_sync), list(proposal.in_sync))
                self._proposer.propose_in_sync(proposal,
                                               partial(self._proposed, queue, proposal))
        except Exception:  # one bad queue must not stop the ticks of the others
            logger.exception("in-sync check failed")
        finally:
            self._arm()

    def _proposals(self) -> list[tuple[Key, LedQueue, ProposeInSync]]:
        led = dict(self._queues.all_led())
        proposals = self.core.tick(led.items(), self._clock.wall_ms())
        return [(p.key, led[p.key], p) for p in proposals]

    def _proposed(self, queue: LedQueue, proposal: ProposeInSync, committed: bool) -> None:
        if committed:
            self.stats["in_sync_changes"] += 1
        else:
            logger.info("queue %r: in-sync change not known to be made; proposing it again",
                        proposal.key[1])
        self.core.proposed(queue, proposal, committed)


def _stream(queue: LedQueue, decision: StreamFrom, bytes_max: int) -> StreamAnswer:
    leader = queue.leader
    batches = stream_batches(queue.log, decision.next_offset, leader.durable_end, bytes_max,
                             queue.sync_batch_size)
    acked = tuple(queue.acked_ranges()) if decision.with_acked else None
    return StreamAnswer(leader.high_watermark, queue.log_start, queue.history.entries,
                        queue.acked_version, acked, tuple(batches))
