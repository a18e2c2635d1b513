"""`ReplicaFeed`: the leader side of queue replication on this node, run on asyncio.

Theory of operation. The decisions are the `LeaderFeed` core's
(replication/queue/leader_feed.py: answer a fetch now, stream, or park it
as a long poll; propose in-sync changes) and the `LeaderFeedDriver` carries
them out. This module gives the driver its asyncio ports and nothing else:
`r.fetch` requests from the cluster RPC (fetch_wire.py) in, their answers
out; the broker's open replicated queue shells as the queues led here
(`ShellQueue`: a parked fetch waits on the gate's `changes`); the metadata
log as the in-sync proposer; the loop's timers over the injected clock. The
deterministic simulation (tests/sim) runs the same driver and core over
simulated ports.

`r.status` answers the controller's failover question: how much of the
queue this node holds (`replica_status`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from logbroker.broker import Broker
from logbroker.cluster.cluster_rpc import ClusterRpc
from logbroker.cluster.envelope import Envelope
from logbroker.cluster.fetch_wire import FETCH, answer_envelope, request_of
from logbroker.cluster.loop_timers import LoopTimers
from logbroker.errors import BrokerError
from logbroker.metadata import Command, SetQueueInSync
from logbroker.queue.queue_shell import QueueShell
from logbroker.queue.replication_gate import ReplicationGate
from replication.queue.epoch_history import EpochHistory
from replication.queue.fetch_protocol import FetchAnswer
from replication.queue.leader_feed import Key, ProposeInSync
from replication.queue.leader_feed_driver import FeedTiming, LeaderFeedDriver
from replication.queue.replication_leader import ReplicationLeader
from segments.clock import SYSTEM_CLOCK, Clock
from segments.log import Log

logger = logging.getLogger(__name__)
CopyStatus = Callable[[str, str], tuple[int, int] | None]


class ShellQueue:
    """`LedQueue` over an open replicated queue shell and its gate."""

    def __init__(self, shell: QueueShell, gate: ReplicationGate, clock: Clock,
                 parked: set[asyncio.Future[None]]) -> None:
        self._shell = shell
        self._gate = gate
        self._clock = clock
        self._parked = parked

    @property
    def fenced(self) -> str | None:
        return self._gate.fenced

    @property
    def leader(self) -> ReplicationLeader:
        return self._gate.leader

    @property
    def history(self) -> EpochHistory:
        return self._gate.history

    @property
    def acked_version(self) -> int:
        return self._gate.acked_version

    @property
    def log_start(self) -> int:
        return self._shell.log.log_start_offset

    @property
    def log(self) -> Log:
        return self._shell.log

    @property
    def sync_batch_size(self) -> int:
        return self._gate.sync_batch_size

    def acked_ranges(self) -> Sequence[tuple[int, int]]:
        return self._shell.cursor.acked.ranges()

    def moved(self, change: Callable[[], object]) -> None:
        self._gate.moved(change)

    def park(self, deadline_ms: int, wake: Callable[[], None]) -> None:
        remaining_s = max(0, deadline_ms - self._clock.monotonic_ms()) / 1000
        waiting = asyncio.ensure_future(self._wait(remaining_s, wake))
        self._parked.add(waiting)
        waiting.add_done_callback(self._parked.discard)

    async def _wait(self, remaining_s: float, wake: Callable[[], None]) -> None:
        await self._gate.changes.wait(remaining_s)
        wake()


class BrokerQueues:
    """`FeedQueues`: the broker's open replicated queue shells."""

    def __init__(self, broker: Callable[[], Broker], clock: Clock) -> None:
        self._broker = broker
        self._clock = clock
        self.parked: set[asyncio.Future[None]] = set()

    def led(self, key: Key) -> ShellQueue | None:
        return self._queue(self._broker().queue(*key))

    def all_led(self) -> list[tuple[Key, ShellQueue]]:
        led = []
        for shell in list(self._broker().all_queues()):
            queue = self._queue(shell)
            if queue is not None:
                led.append(((shell.settings.vhost, shell.name), queue))
        return led

    def _queue(self, shell: QueueShell | None) -> ShellQueue | None:
        if shell is None or shell.replication is None or shell.closed:
            return None
        return ShellQueue(shell, shell.replication, self._clock, self.parked)


class MetadataInSync:
    """`InSyncProposer` through the metadata log (`SetQueueInSync`)."""

    def __init__(self, propose: Callable[[Command], Awaitable[None]]) -> None:
        self._propose = propose
        self._proposing: set[asyncio.Future[None]] = set()

    def propose_in_sync(self, proposal: ProposeInSync, done: Callable[[bool], None]) -> None:
        command = SetQueueInSync(*proposal.key, proposal.epoch, proposal.in_sync)
        task = asyncio.ensure_future(self._run(command, done))
        self._proposing.add(task)
        task.add_done_callback(self._proposing.discard)

    async def _run(self, command: SetQueueInSync, done: Callable[[bool], None]) -> None:
        try:
            await self._propose(command)
        except BrokerError as error:
            logger.info("queue %r: in-sync change not made (%s)", command.name,
                        error.reply_text)
            done(False)
            return
        done(True)


class ReplicaFeed:
    def __init__(self, node_name: str, rpc: ClusterRpc, broker: Callable[[], Broker],
                 propose: Callable[[Command], Awaitable[None]], copy_status: CopyStatus,
                 started_ms: Callable[[], int], clock: Clock = SYSTEM_CLOCK,
                 timing: FeedTiming | None = None) -> None:
        self._broker = broker
        self._copy_status = copy_status
        self._started_ms = started_ms
        self._queues = BrokerQueues(broker, clock)
        self.driver = LeaderFeedDriver(node_name, self._queues, MetadataInSync(propose),
                                       LoopTimers(clock), clock, timing)
        rpc.handle(FETCH, self._fetch)
        rpc.handle("r.status", self._status)

    def start(self) -> None:
        self.driver.start()

    async def stop(self) -> None:
        self.driver.stop()
        parked = list(self._queues.parked)
        for waiting in parked:
            waiting.cancel()
        await asyncio.gather(*parked, return_exceptions=True)

    async def _fetch(self, peer: str, envelope: Envelope) -> Envelope:
        vhost, name, request = request_of(envelope)
        answered: asyncio.Future[FetchAnswer] = asyncio.get_running_loop().create_future()

        def reply(answer: FetchAnswer) -> None:
            if not answered.done():  # the request may have been cancelled meanwhile
                answered.set_result(answer)
        self.driver.fetch(peer, (vhost, name), request, reply)
        return answer_envelope(await answered)

    # -------------------------------------------------------------- status

    async def _status(self, peer: str, envelope: Envelope) -> Envelope:
        vhost, name = str(envelope.header["v"]), str(envelope.header["q"])
        status = self.replica_status(vhost, name)
        if status is None:
            return Envelope("none")
        return Envelope("ok", status)

    def replica_status(self, vhost: str, name: str) -> dict[str, int] | None:
        """This node's copy of the queue: log end, last epoch, when the node started."""
        started = self._started_ms()
        shell = self._broker().queue(vhost, name)
        if shell is not None and shell.replication is not None and not shell.closed:
            return {"log_end": shell.log.next_offset,
                    "last_epoch": shell.replication.history.latest_epoch, "started_ms": started}
        copy = self._copy_status(vhost, name)
        if copy is None:
            return None
        log_end, last_epoch = copy
        return {"log_end": log_end, "last_epoch": last_epoch, "started_ms": started}
