"""`ReplicaFeed`: the leader side of queue replication on this node.

Theory of operation. A follower fetches (`r.fetch`) with the queue's epoch,
its next offset, its last epoch, the ack version and the high watermark it
has. The queue's `ReplicationGate` judges the fetch (`ReplicationLeader
.on_fetch`); a `Stream` answer carries the records from that offset that are
durable here (the log's own batches, at most `FETCH_BYTES_MAX`), the epoch
history, the log
start and the high watermark, and the whole acked range set when the
follower's version is old. A follower that is caught up is answered when
something changes (new records, acks, a higher watermark) or after
`FETCH_WAIT_S`: a long poll, so nothing is queued for a follower and the
leader keeps no state about it but its progress numbers.

Every `TICK_S` the feed asks each gate whether the in-sync set should
change and proposes `SetQueueInSync` for its epoch; the metadata log decides.

`r.status` answers the controller's failover question: how much of the
queue this node holds (`replica_status`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from logbroker.cluster.envelope import Envelope
from logbroker.errors import BrokerError
from logbroker.metadata import SetQueueInSync
from logbroker.queue.queue_shell import QueueShell
from logbroker.queue.replication_gate import ReplicationGate
from replication.queue.replication_leader import Refuse, Reset, Stream, Truncate
from replication.queue.stream_batches import stream_batches

if TYPE_CHECKING:
    from logbroker.cluster.cluster_node import ClusterNode

logger = logging.getLogger(__name__)
FETCH_WAIT_S = 1.0
FETCH_BYTES_MAX = 1 << 20
TICK_S = 0.25


def _now_ms() -> int:
    return int(time.time() * 1000)


class ReplicaFeed:
    def __init__(self, node: ClusterNode) -> None:
        self.node = node
        self._ticker: asyncio.Future[None] | None = None
        self._proposing: set[asyncio.Future[None]] = set()
        node.rpc.handle("r.fetch", self._fetch)
        node.rpc.handle("r.status", self._status)

    def start(self) -> None:
        self._ticker = asyncio.ensure_future(self._tick_loop())

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)

    # --------------------------------------------------------------- fetch

    async def _fetch(self, peer: str, envelope: Envelope) -> Envelope:
        header = envelope.header
        vhost, name = str(header["v"]), str(header["q"])
        epoch, next_offset = int(header["e"]), int(header["n"])
        deadline = time.monotonic() + FETCH_WAIT_S
        while True:
            shell = self.node.broker.queue(vhost, name)
            if shell is None or shell.replication is None or shell.closed:
                return Envelope("refused", {"reason": f"node {self.node.node_name} does "
                                            f"not lead queue '{name}' in vhost '{vhost}'"})
            gate = shell.replication
            if gate.fenced is not None:
                return Envelope("refused", {"reason": gate.fenced})
            verdict = self._judge(gate, shell, peer, header)
            if not isinstance(verdict, Stream):
                return _verdict_envelope(verdict)
            news = (gate.leader.durable_end > next_offset
                    or int(header["av"]) != gate.acked_version
                    or int(header["hw"]) < gate.high_watermark)
            remaining = deadline - time.monotonic()
            if news or remaining <= 0 or epoch != gate.leader.epoch:
                return _stream(shell, gate, next_offset, int(header["av"]))
            await gate.changes.wait(remaining)

    def _judge(self, gate: ReplicationGate, shell: QueueShell, peer: str,
               header: dict[str, Any]) -> Stream | Truncate | Reset | Refuse:
        verdict: list[Stream | Truncate | Reset | Refuse] = []

        def judge() -> None:
            verdict.append(gate.leader.on_fetch(
                peer, int(header["e"]), int(header["n"]), int(header["le"]), gate.history,
                shell.log.log_start_offset, _now_ms(), int(header.get("ls", header["n"]))))
            if isinstance(verdict[0], Stream):
                gate.leader.follower_acked_version(peer, int(header["av"]))
        gate.moved(judge)
        return verdict[0]

    # -------------------------------------------------------------- status

    async def _status(self, peer: str, envelope: Envelope) -> Envelope:
        vhost, name = str(envelope.header["v"]), str(envelope.header["q"])
        status = self.replica_status(vhost, name)
        if status is None:
            return Envelope("none")
        return Envelope("ok", status)

    def replica_status(self, vhost: str, name: str) -> dict[str, int] | None:
        """This node's copy of the queue: log end, last epoch, when the node started."""
        started = self.node.started_ms
        shell = self.node.broker.queue(vhost, name)
        if shell is not None and shell.replication is not None and not shell.closed:
            return {"log_end": shell.log.next_offset,
                    "last_epoch": shell.replication.history.latest_epoch, "started_ms": started}
        copy = self.node.followers.copy_status(vhost, name)
        if copy is None:
            return None
        log_end, last_epoch = copy
        return {"log_end": log_end, "last_epoch": last_epoch, "started_ms": started}

    # ------------------------------------------------------------ in sync

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            with contextlib.suppress(Exception):
                self._tick()

    def _tick(self) -> None:
        broker = self.node.broker
        now = _now_ms()
        for shell in list(broker.all_queues()):
            gate = shell.replication
            if gate is None or gate.fenced is not None:
                continue
            proposal = gate.leader.tick(now)
            if proposal is not None:
                command = SetQueueInSync(shell.settings.vhost, shell.name, gate.leader.epoch,
                                         proposal)
                task = asyncio.ensure_future(self._propose(gate, command))
                self._proposing.add(task)
                task.add_done_callback(self._proposing.discard)

    async def _propose(self, gate: ReplicationGate, command: SetQueueInSync) -> None:
        logger.info("queue %r: in-sync replicas %s -> %s", command.name,
                    list(gate.leader.in_sync), list(command.in_sync))
        try:
            await self.node.metadata.propose(command)
        except BrokerError as error:
            logger.info("queue %r: in-sync change not known to be made (%s); proposing it "
                        "again", command.name, error.reply_text)
            gate.leader.in_sync_change_failed()
            return
        # Committed (or it held already, which changes nothing and sends no event).
        if gate.fenced is None and gate.leader.epoch == command.epoch:
            gate.moved(lambda: gate.leader.in_sync_committed(command.in_sync))


def _verdict_envelope(verdict: Truncate | Reset | Refuse) -> Envelope:
    if isinstance(verdict, Truncate):
        return Envelope("truncate", {"to": verdict.to_offset, "epoch": verdict.epoch})
    if isinstance(verdict, Reset):
        return Envelope("reset", {"start": verdict.start_offset})
    return Envelope("refused", {"reason": verdict.reason})


def _stream(shell: QueueShell, gate: ReplicationGate, next_offset: int,
            acked_version: int) -> Envelope:
    blobs = stream_batches(shell.log, next_offset, gate.leader.durable_end, FETCH_BYTES_MAX,
                           gate.sync_batch_size)
    header: dict[str, Any] = {
        "hw": gate.high_watermark, "start": shell.log.log_start_offset,
        "epochs": gate.history.to_json(), "av": gate.acked_version,
    }
    if acked_version != gate.acked_version:
        header["acked"] = [[lo, hi] for lo, hi in shell.cursor.acked.ranges()]
    return Envelope("stream", header, tuple(blobs))
