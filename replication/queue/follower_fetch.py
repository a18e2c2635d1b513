"""`FollowerFetch`: when and what a follower replica fetches, and what it does with answers.

Theory of operation. One core per followed queue. The follower pulls from
the leader the queue's record names: `poll` (when the driver's timer fires)
sends a fetch built from the replica's position, unless there is no leader
to fetch from (none, or this node), and waits for its answer up to
`fetch_timeout_ms`. The answer (`answered`) says what to do:

- `StreamAnswer` with batches: append them and make them durable (`Append`,
  `Sync`); once `synced`, take the acked ranges, the high watermark and the
  log start (`TakeProgress`) and fetch again at once - or, when the replica is
  still more than `catch_up_lag` below the high watermark (copying a backlog:
  it is not in sync, no confirm waits for it), rest as long as that fetch
  took (at most `catch_up_rest_max_ms`), so the copy takes about half of what
  the two nodes can give and the queue's publishers keep the rest (RabbitMQ
  paces a mirror's sync in batches, Kafka throttles catching-up replicas);
- `StreamAnswer` without batches (a long poll that ended on acks, a higher
  watermark or its deadline): take the progress, fetch again;
- `Truncate` / `Reset`: apply to the replica, fetch again;
- `Refuse` (another epoch, not a member yet: the metadata catches up), or no
  leader to fetch from: wait `backoff_min_ms`.

A fetch that fails (no answer within the timeout, the peer unreachable, an
error answer, or an answer the replica could not take) backs off: waits
double from `backoff_min_ms` up to `backoff_max_ms`, and any answer brings
them back to the minimum. A change of the queue's record (`wake`: a new
leader or epoch) ends a wait or a rest at once, and skips the next one if it
comes while a fetch is under way.

Invariants: at most one fetch is outstanding, and only the answer to it counts
(a late answer to a fetch given up on, or a duplicate, is ignored); the
next fetch, which reports the replica's end as persisted, is sent only after
the batches of the previous answer are durable ("persist before send"); the
acks, high watermark and log start of an answer are taken only after its
batches are durable; the pause between the end of one fetch and the next is
at most max(backoff_max_ms, catch_up_rest_max_ms).
"""

from __future__ import annotations

from dataclasses import dataclass

from replication.queue.epoch_history import EpochStart
from replication.queue.fetch_protocol import FetchAnswer, FetchRequest, StreamAnswer
from replication.queue.replication_leader import Refuse, Reset, Truncate

CATCHING_UP = "catching up"  # a `WaitUntil` that leaves the two nodes to the publishers


@dataclass(frozen=True, slots=True)
class FetchTiming:
    fetch_timeout_ms: int = 5_000
    backoff_min_ms: int = 50
    backoff_max_ms: int = 1_000
    catch_up_lag: int = 10_000  # messages below the high watermark: copying a backlog
    catch_up_rest_max_ms: int = 500


@dataclass(frozen=True, slots=True)
class ReplicaPosition:
    """What the follower's replica holds, as a fetch reports it."""

    next_offset: int
    last_epoch: int
    log_start: int
    acked_version: int
    high_watermark: int | None  # None: none heard since the replica was opened


# ------------------------------------------------------------------- effects

@dataclass(frozen=True, slots=True)
class SendFetch:
    request_id: int
    leader: str
    request: FetchRequest


@dataclass(frozen=True, slots=True)
class Append:
    batches: tuple[bytes, ...]
    epochs: tuple[EpochStart, ...]


@dataclass(frozen=True, slots=True)
class Sync:
    """Make the appended batches durable, then call `synced`."""


@dataclass(frozen=True, slots=True)
class TakeProgress:
    answer: StreamAnswer


@dataclass(frozen=True, slots=True)
class ApplyTruncate:
    verdict: Truncate


@dataclass(frozen=True, slots=True)
class ApplyReset:
    start_offset: int


@dataclass(frozen=True, slots=True)
class WaitUntil:
    """Call `poll` at `at_ms` (a later `WaitUntil` replaces it)."""

    at_ms: int
    why: str


FollowerEffect = SendFetch | Append | Sync | TakeProgress | ApplyTruncate | ApplyReset | WaitUntil


# -------------------------------------------------------------------- states

@dataclass(frozen=True, slots=True)
class _Idle:
    ready_ms: int


@dataclass(frozen=True, slots=True)
class _Fetching:
    request_id: int
    sent_ms: int
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class _Syncing:
    answer: StreamAnswer
    sent_ms: int


class FollowerFetch:
    def __init__(self, node: str, timing: FetchTiming, now_ms: int) -> None:
        self.node = node
        self.timing = timing
        self._state: _Idle | _Fetching | _Syncing = _Idle(now_ms)
        self._backoff_ms = timing.backoff_min_ms
        self._woken = False
        self._requests = 0

    @property
    def outstanding(self) -> int | None:
        """The id of the fetch waiting for its answer, if any."""
        return self._state.request_id if isinstance(self._state, _Fetching) else None

    @property
    def syncing(self) -> bool:
        return isinstance(self._state, _Syncing)

    # ------------------------------------------------------------------ events

    def poll(self, now_ms: int, leader: str | None, epoch: int,
             position: ReplicaPosition) -> list[FollowerEffect]:
        """The timer fired (or the driver starts): fetch if it is time."""
        state = self._state
        if isinstance(state, _Fetching):
            if now_ms < state.deadline_ms:
                return [WaitUntil(state.deadline_ms, "fetch timeout")]
            return self._failed(now_ms)
        if isinstance(state, _Syncing):
            return []
        if now_ms < state.ready_ms:
            return [WaitUntil(state.ready_ms, "waiting")]
        if leader is None or leader == self.node:
            return self._wait(now_ms, self.timing.backoff_min_ms, "no leader to fetch from")
        self._requests += 1
        deadline = now_ms + self.timing.fetch_timeout_ms
        self._state = _Fetching(self._requests, now_ms, deadline)
        # The wait first: a transport may answer (fail) before `SendFetch` returns.
        return [WaitUntil(deadline, "fetch timeout"),
                SendFetch(self._requests, leader, _request(epoch, position))]

    def wake(self, now_ms: int) -> list[FollowerEffect]:
        """The queue's record changed: a wait ends now (one under way: the next is skipped)."""
        if isinstance(self._state, _Idle) and self._state.ready_ms > now_ms:
            self._state = _Idle(now_ms)
            return [WaitUntil(now_ms, "the queue's record changed")]
        if not isinstance(self._state, _Idle):
            self._woken = True
        return []

    def answered(self, request_id: int, answer: FetchAnswer, now_ms: int
                 ) -> list[FollowerEffect]:
        state = self._state
        if not isinstance(state, _Fetching) or state.request_id != request_id:
            return []  # given up on already, or a duplicate
        self._backoff_ms = self.timing.backoff_min_ms
        if isinstance(answer, StreamAnswer):
            if answer.batches:
                self._state = _Syncing(answer, state.sent_ms)
                return [Append(answer.batches, answer.epochs), Sync()]
            return [TakeProgress(answer), *self._wait(now_ms, 0, "streaming")]
        if isinstance(answer, Truncate):
            return [ApplyTruncate(answer), *self._wait(now_ms, 0, "cut")]
        if isinstance(answer, Reset):
            return [ApplyReset(answer.start_offset), *self._wait(now_ms, 0, "reset")]
        assert isinstance(answer, Refuse)
        return self._wait(now_ms, self.timing.backoff_min_ms, f"refused: {answer.reason}")

    def synced(self, now_ms: int, next_offset: int) -> list[FollowerEffect]:
        """The appended batches are durable; `next_offset` is the replica's end now."""
        state = self._state
        if not isinstance(state, _Syncing):
            return []
        answer = state.answer
        if answer.high_watermark - next_offset > self.timing.catch_up_lag:
            rest = min(self.timing.catch_up_rest_max_ms, now_ms - state.sent_ms)
            return [TakeProgress(answer), *self._wait(now_ms, rest, CATCHING_UP)]
        return [TakeProgress(answer), *self._wait(now_ms, 0, "streaming")]

    def failed(self, request_id: int | None, now_ms: int) -> list[FollowerEffect]:
        """The fetch `request_id` failed (None: whatever is under way, the replica could
        not take an answer or make it durable)."""
        state = self._state
        if request_id is not None and (not isinstance(state, _Fetching)
                                       or state.request_id != request_id):
            return []
        return self._failed(now_ms)

    # ---------------------------------------------------------------- helpers

    def _failed(self, now_ms: int) -> list[FollowerEffect]:
        delay = self._backoff_ms
        self._backoff_ms = min(self.timing.backoff_max_ms, self._backoff_ms * 2)
        return self._wait(now_ms, delay, "backing off")

    def _wait(self, now_ms: int, delay_ms: int, why: str) -> list[FollowerEffect]:
        if self._woken:
            self._woken, delay_ms = False, 0
        self._state = _Idle(now_ms + delay_ms)
        return [WaitUntil(now_ms + delay_ms, why)]


def _request(epoch: int, position: ReplicaPosition) -> FetchRequest:
    return FetchRequest(epoch, position.next_offset, position.last_epoch, position.log_start,
                        position.acked_version, position.high_watermark or 0)
