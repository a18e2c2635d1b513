"""`LeaderFeed`: how a queue leader answers its followers' fetches, and when it proposes
in-sync changes (pure).

Theory of operation. A fetch is judged by the queue's `ReplicationLeader`
(`on_fetch`, run through the queue's `moved` so that a fetch that raises the
high watermark releases the confirms and messages it allows); a verdict
other than `Stream` (`Truncate`, `Reset`, `Refuse`) is answered at once, and
so is a fetch for a queue this node does not lead (or whose gate is fenced).
A `Stream` is answered (`StreamFrom`) when there is news for the follower -
records durable here past its offset, acks it has not seen, a higher
watermark - or when its long poll ran out, or when the epoch moved on;
otherwise it is parked (`Park`) until the queue changes or its deadline, and
judged again then. So nothing is queued for a follower and the leader keeps
no state about it but its progress numbers; a caught-up follower hears of a
change one network hop after it happens.

Every tick the feed asks each unfenced queue's leader whether its in-sync set
should change (`ReplicationLeader.tick`) and proposes it for the leader's
epoch (`ProposeInSync`); the metadata log decides. A proposal whose outcome
is unknown leaves the change pending, to be proposed again
(`in_sync_change_failed`); a committed one reaches the leader at once if it
still leads that epoch (the metadata's own event may come later, or never
when the set held already).

Invariants: a stream never carries records above the leader's durable end
(the driver reads them up to it); a fetch is answered exactly once, and a
parked fetch is answered by its deadline; in-sync proposals name the epoch
the leader was at when it decided them.

Two clocks: deadlines are monotonic (`now_ms`); the `ReplicationLeader`'s
lag bookkeeping runs on the wall clock it was created with (`wall_ms`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from replication.queue.epoch_history import EpochHistory
from replication.queue.fetch_protocol import FetchRequest
from replication.queue.replication_leader import (
    FetchVerdict,
    Refuse,
    ReplicationLeader,
    Reset,
    Stream,
    Truncate,
)

Key = tuple[str, str]  # (vhost, queue name)


class FedQueue(Protocol):
    """A queue this node leads, as the feed judges fetches for it (its `ReplicationGate`
    and log)."""

    @property
    def fenced(self) -> str | None: ...

    @property
    def leader(self) -> ReplicationLeader: ...

    @property
    def history(self) -> EpochHistory: ...

    @property
    def acked_version(self) -> int: ...

    @property
    def log_start(self) -> int: ...

    def moved(self, change: Callable[[], object]) -> None:
        """Run a change to the leader core and release what it allows."""


@dataclass(frozen=True, slots=True)
class AnswerNow:
    answer: Truncate | Reset | Refuse


@dataclass(frozen=True, slots=True)
class StreamFrom:
    next_offset: int
    with_acked: bool  # the follower's acked version is old: send the whole range set


@dataclass(frozen=True, slots=True)
class Park:
    deadline_ms: int


FeedDecision = AnswerNow | StreamFrom | Park


@dataclass(frozen=True, slots=True)
class ProposeInSync:
    key: Key
    epoch: int
    in_sync: tuple[str, ...]


class LeaderFeed:
    def __init__(self, node: str, wait_ms: int) -> None:
        self.node = node
        self.wait_ms = wait_ms

    def deadline(self, now_ms: int) -> int:
        """The long poll's end for a fetch arriving at `now_ms`."""
        return now_ms + self.wait_ms

    def on_fetch(self, peer: str, key: Key, request: FetchRequest, queue: FedQueue | None,
                 now_ms: int, deadline_ms: int, wall_ms: int) -> FeedDecision:
        if queue is None:
            return AnswerNow(Refuse(f"node {self.node} does not lead queue '{key[1]}' in "
                                    f"vhost '{key[0]}'"))
        if queue.fenced is not None:
            return AnswerNow(Refuse(queue.fenced))
        verdict = _judge(queue, peer, request, wall_ms)
        if not isinstance(verdict, Stream):
            return AnswerNow(verdict)
        leader = queue.leader
        stale_acks = request.acked_version != queue.acked_version
        news = (leader.durable_end > request.next_offset or stale_acks
                or request.high_watermark < leader.high_watermark)
        if news or now_ms >= deadline_ms or request.epoch != leader.epoch:
            return StreamFrom(request.next_offset, stale_acks)
        return Park(deadline_ms)

    def tick(self, queues: Iterable[tuple[Key, FedQueue]], wall_ms: int
             ) -> list[ProposeInSync]:
        proposals = []
        for key, queue in queues:
            if queue.fenced is not None:
                continue
            in_sync = queue.leader.tick(wall_ms)
            if in_sync is not None:
                proposals.append(ProposeInSync(key, queue.leader.epoch, in_sync))
        return proposals

    def proposed(self, queue: FedQueue, proposal: ProposeInSync, committed: bool) -> None:
        """The proposal's outcome: committed (or it held already), or not known."""
        leader = queue.leader
        if not committed:
            leader.in_sync_change_failed()
        elif queue.fenced is None and leader.epoch == proposal.epoch:
            queue.moved(lambda: leader.in_sync_committed(proposal.in_sync))


def _judge(queue: FedQueue, peer: str, request: FetchRequest, wall_ms: int) -> FetchVerdict:
    verdicts: list[FetchVerdict] = []

    def judge() -> None:
        leader = queue.leader
        verdict = leader.on_fetch(peer, request.epoch, request.next_offset,
                                  request.last_epoch, queue.history, queue.log_start, wall_ms,
                                  request.log_start)
        verdicts.append(verdict)
        if isinstance(verdict, Stream):
            leader.follower_acked_version(peer, request.acked_version)
    queue.moved(judge)
    return verdicts[0]
