"""`NodeFeed`: the leader side of replication on a simulated node (`ReplicaFeed`, replica_feed.py).

`serve_fetch` judges a fetch through the gate (`ReplicationLeader.on_fetch`
inside `gate.moved`, with the follower's log start, so a fetch that moves
the high watermark releases what it allows), answers a non-`Stream` verdict
at once, and answers a `Stream` when there is news for the follower (records
durable here past its offset, acks it has not seen, a higher watermark), when
its long poll ran out, or when the epoch moved on; otherwise it returns None
and the node parks the fetch until the queue changes (a write made durable
included: `gate.persisted` wakes fetches) or its deadline passes, then runs
it again, as the real loop does after `gate.changes.wait`. A stream carries
only records below the leader's durable end: a leader that crashes and
reopens the same epoch must not have handed out records it then writes
differently.

Every `INSYNC_EVERY` ticks `NodeFeed.in_sync_tick` asks each unfenced gate
whether its in-sync set should change and proposes `SetQueueInSync` for its
epoch (`ReplicaFeed._tick`); a failed proposal lets the gate propose again
(`_propose`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from logbroker.metadata import Command, SetQueueInSync
from replication.queue.fetch_protocol import FetchAnswer, StreamAnswer
from replication.queue.replication_leader import (
    Refuse,
    Reset,
    Stream,
    Truncate,
)
from replication.queue.stream_batches import stream_batches
from tests.sim.queue_leader import VHOST, LeaderReplica
from tests.sim.queue_messages import ClusterMessage, Fetch, FetchReply

FETCH_BYTES_MAX = 600  # small, so catching up takes several fetches
FETCH_WAIT = 5  # a caught-up follower's long poll, in ticks
INSYNC_EVERY = 2


class FeedHost(Protocol):
    """The node a feed runs on."""

    id: str
    leaders: dict[str, LeaderReplica]

    @property
    def now(self) -> int: ...

    @property
    def stats(self) -> Counter[str]: ...

    def send(self, message: ClusterMessage) -> None: ...

    def propose(self, command: Command, done: Callable[[bool], None] | None = None
                ) -> None: ...

    def log(self, text: str) -> None: ...


@dataclass
class _Parked:
    fetch: Fetch
    deadline: int
    changes: int
    shell: LeaderReplica | None


class NodeFeed:
    def __init__(self, host: FeedHost) -> None:
        self._host = host
        self._parked: list[_Parked] = []

    def fetch(self, fetch: Fetch) -> None:
        """A fetch arrives: answered now, or parked for at most `FETCH_WAIT`."""
        self._serve(fetch, self._host.now + FETCH_WAIT)

    def _serve(self, fetch: Fetch, deadline: int) -> None:
        host = self._host
        shell = host.leaders.get(fetch.queue)
        answer = serve_fetch(shell, fetch, host.now, host.now >= deadline)
        if answer is not None:
            host.send(answer)
        else:
            assert shell is not None
            self._parked.append(_Parked(fetch, deadline, shell.changes, shell))

    def wake_parked(self) -> None:
        """Run again the fetches whose queue changed (`gate.changes`) or whose wait ran out."""
        parked, self._parked = self._parked, []
        now = self._host.now
        for entry in parked:
            shell = self._host.leaders.get(entry.fetch.queue)
            if shell is not entry.shell or shell is None or shell.changes != entry.changes \
                    or now >= entry.deadline:
                self._serve(entry.fetch, entry.deadline)
            else:
                self._parked.append(entry)

    def in_sync_tick(self) -> None:
        """ReplicaFeed._tick, every `INSYNC_EVERY` ticks."""
        host = self._host
        if host.now % INSYNC_EVERY:
            return
        for name, shell in host.leaders.items():
            gate = shell.gate
            if gate.fenced is not None:
                continue
            proposal = gate.leader.tick(host.now)
            if proposal is None:
                continue
            host.log(f"{host.id} proposes in sync {list(proposal)} for {name} "
                     f"(epoch {gate.leader.epoch}, was {list(gate.leader.in_sync)})")
            host.propose(SetQueueInSync(VHOST, name, gate.leader.epoch, proposal),
                         _in_sync_outcome(host.stats, shell, proposal))


def _in_sync_outcome(stats: Counter[str], shell: LeaderReplica, proposal: tuple[str, ...]
                     ) -> Callable[[bool], None]:
    """ReplicaFeed._propose: a change not known to be made is proposed again (it stays
    pending); a committed one reaches the gate at once (a no-op sends no event)."""
    leader = shell.gate.leader
    epoch = leader.epoch

    def done(ok: bool) -> None:
        if not ok:
            leader.in_sync_change_failed()
            return
        stats["in_sync_changes"] += 1
        if shell.gate.fenced is None and leader.epoch == epoch and not shell.closed:
            shell.moved(partial(leader.in_sync_committed, proposal))
    return done


def serve_fetch(shell: LeaderReplica | None, fetch: Fetch, now_ms: int, expired: bool
                ) -> FetchReply | None:
    request = fetch.fetch
    epoch, next_offset = request.epoch, request.next_offset
    if shell is None or shell.closed:
        return _answer(fetch, Refuse(f"node {fetch.target} does not lead queue "
                                     f"'{fetch.queue}'"))
    gate = shell.gate
    if gate.fenced is not None:
        return _answer(fetch, Refuse(gate.fenced))
    verdicts: list[Stream | Truncate | Reset | Refuse] = []
    shell.moved(lambda: verdicts.append(gate.leader.on_fetch(
        fetch.source, epoch, next_offset, request.last_epoch, gate.history,
        shell.log.log_start_offset, now_ms, request.log_start)))
    verdict = verdicts[0]
    if not isinstance(verdict, Stream):
        return _answer(fetch, verdict)
    news = (gate.leader.durable_end > next_offset
            or request.acked_version != gate.acked_version
            or request.high_watermark < gate.high_watermark)
    if news or expired or epoch != gate.leader.epoch:
        return _stream(shell, fetch, next_offset, request.acked_version)
    return None


def _answer(fetch: Fetch, answer: FetchAnswer) -> FetchReply:
    return FetchReply(fetch.target, fetch.source, fetch.request, answer)


def _stream(shell: LeaderReplica, fetch: Fetch, next_offset: int,
            acked_version: int) -> FetchReply:
    gate, log = shell.gate, shell.log
    blobs = stream_batches(log, next_offset, gate.leader.durable_end, FETCH_BYTES_MAX,
                           gate.sync_batch_size)
    acked = None
    if acked_version != gate.acked_version:
        acked = tuple(shell.cursor.acked.ranges())
    return _answer(fetch, StreamAnswer(gate.high_watermark, log.log_start_offset,
                                       gate.history.entries, gate.acked_version, acked,
                                       tuple(blobs)))
