"""`QueueFollowers`: the follower replicas on this node, run on asyncio.

Theory of operation. For every replicated queue this node is a member of
but does not lead, a `FollowerFetch` core (replication/queue/follower_fetch.py)
decides when to fetch from the leader the metadata names, and what to do
with the answer; the `FollowerFetchDriver` carries its effects out. This
module gives the driver its asyncio ports and nothing else: the cluster RPC
as the transport (`r.fetch`, fetch_wire.py), the metadata's queue records,
an fsync thread as the replica's disk (the native one of
`logbroker/queue/native_fsync.py` when the sync is only an fdatasync, so the
loop never waits for the GIL behind it), and the loop's timers over the
injected clock. The deterministic simulation (tests/sim) runs the same
driver and cores over simulated ports.

Clients read a copy only through `view` (replay served by an in-sync
follower, up to the high watermark it heard: `follower_view`). Promotion
closes the replica (`stop`) and the broker opens the queue shell on the same
directory.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable

from logbroker.cluster.cluster_rpc import ClusterRpc
from logbroker.cluster.fetch_wire import answer_of, request_envelope
from logbroker.cluster.follower_view import FollowerView
from logbroker.cluster.loop_timers import LoopTimers
from logbroker.errors import BrokerError
from logbroker.metadata import QueueRecord
from logbroker.queue.native_fsync import NativeFsync, available
from logbroker.queue.sidecar_writer import SidecarWriter
from replication.queue.fetch_protocol import FetchAnswer, FetchRequest
from replication.queue.follower_fetch import FetchTiming
from replication.queue.follower_fetch_driver import (
    FetchFailed,
    FollowerFetchDriver,
    Key,
    LeaderAt,
)
from replication.queue.follower_replica import FollowerReplica
from segments.clock import SYSTEM_CLOCK, Clock
from segments.filesystem import FileSystem

QueueRecords = Callable[[str, str], QueueRecord | None]
QueueDirectories = Callable[[str, str], str]


class RpcFetchTransport:
    """`FetchTransport` over the cluster RPC: one task per fetch, answered once."""

    def __init__(self, rpc: ClusterRpc, timeout_ms: int) -> None:
        self._rpc = rpc
        self._timeout_s = timeout_ms / 1000
        self._calls: set[asyncio.Future[None]] = set()

    def fetch(self, leader: str, key: Key, request: FetchRequest,
              on_answer: Callable[[FetchAnswer | FetchFailed], None]) -> None:
        call = asyncio.ensure_future(self._call(leader, key, request, on_answer))
        self._calls.add(call)
        call.add_done_callback(self._calls.discard)

    async def _call(self, leader: str, key: Key, request: FetchRequest,
                    on_answer: Callable[[FetchAnswer | FetchFailed], None]) -> None:
        try:
            envelope = await self._rpc.call(leader, request_envelope(*key, request),
                                            self._timeout_s)
            answer: FetchAnswer | FetchFailed = answer_of(envelope)
        except BrokerError as error:
            answer = FetchFailed(error.reply_text)
        except Exception as error:  # a malformed answer: back off, and say so
            answer = FetchFailed(str(error), unexpected=True)
        on_answer(answer)

    async def close(self) -> None:
        for call in list(self._calls):
            call.cancel()
        await asyncio.gather(*self._calls, return_exceptions=True)


class ThreadDisk:
    """`ReplicaDisk`: replicas opened on the node's file system, fsynced on a thread.

    Each copy's sealed segments below its high watermark get their meta sidecar
    (sidecar_writer.py) after its syncs, so a leader taking the queue over does not
    read the whole backlog to open it."""

    def __init__(self, fs: FileSystem, directories: QueueDirectories,
                 native_fsync: bool | None = None) -> None:
        """`native_fsync`: fdatasync on the native thread when a sync is only that
        (default: when the extension is built)."""
        self._fs = fs
        self._directories = directories
        self._syncing: dict[FollowerReplica, asyncio.Future[None]] = {}
        self._sidecars: dict[FollowerReplica, SidecarWriter] = {}
        self._use_native = available() if native_fsync is None else native_fsync
        self._native: dict[FollowerReplica, NativeFsync] = {}

    def open(self, key: Key) -> FollowerReplica:
        directory = self._directories(*key)
        replica = FollowerReplica.open(self._fs, directory)
        self._sidecars[replica] = SidecarWriter(
            self._fs, directory, replica.log, asyncio.get_running_loop().call_soon,
            settled_below=lambda: replica.high_watermark or 0)
        return replica

    def sync(self, replica: FollowerReplica, done: Callable[[Exception | None], None]
             ) -> None:
        point = replica.sync_point() if self._use_native else None
        fds = point.fds() if point is not None else None
        syncing: asyncio.Future[None]
        if point is not None and fds:
            native = self._native.get(replica)
            if native is None:
                native = self._native[replica] = NativeFsync()
            syncing = asyncio.ensure_future(_fdatasync(native, fds, point.finish))
        else:
            syncing = asyncio.ensure_future(asyncio.to_thread(replica.sync))
        self._syncing[replica] = syncing

        def finished(future: asyncio.Future[None]) -> None:
            self._syncing.pop(replica, None)
            sidecars = self._sidecars.get(replica)
            if sidecars is not None and not replica.closed:
                sidecars.wrote()
            if not future.cancelled():
                error = future.exception()
                done(error if isinstance(error, Exception) else None)
        syncing.add_done_callback(finished)

    async def settled(self, replica: FollowerReplica) -> None:
        """A thread may still be fsyncing `replica`: let it finish, and stop its native
        thread (before closing it). Its sidecars stop here: a copy is closed to be
        promoted, or forgotten."""
        sidecars = self._sidecars.pop(replica, None)
        if sidecars is not None:
            sidecars.close()
        syncing = self._syncing.get(replica)
        if syncing is not None:
            await asyncio.gather(syncing, return_exceptions=True)
        native = self._native.pop(replica, None)
        if native is not None:
            native.close()


async def _fdatasync(native: NativeFsync, fds: tuple[int, ...],
                     finish: Callable[[], None]) -> None:
    await native.fdatasync(fds)
    finish()


class QueueFollowers:
    def __init__(self, node_name: str, rpc: ClusterRpc, records: QueueRecords,
                 fs: FileSystem, directories: QueueDirectories, clock: Clock = SYSTEM_CLOCK,
                 timing: FetchTiming | None = None) -> None:
        timing = timing or FetchTiming()
        self._records = records
        self._directories = directories
        self._transport = RpcFetchTransport(rpc, timing.fetch_timeout_ms)
        self._disk = ThreadDisk(fs, directories)
        self.driver = FollowerFetchDriver(node_name, self._transport, self._leader_at,
                                          self._disk, LoopTimers(clock), clock, timing)

    def _leader_at(self, key: Key) -> LeaderAt | None:
        record = self._records(*key)
        return LeaderAt(record.leader_node, record.epoch) if record is not None else None

    # -------------------------------------------------- QueueReplicas protocol

    def following(self) -> set[Key]:
        return self.driver.following()

    def follow(self, vhost: str, name: str) -> None:
        """Follow the queue (its record changed: a waiting loop retries at once)."""
        self.driver.follow((vhost, name))

    async def stop(self, vhost: str, name: str) -> int | None:
        """Stop following and close the replica; return the high watermark it knew
        (None: it heard none since it was opened)."""
        replica = self.driver.stop((vhost, name))
        if replica is None:
            return None
        await self._disk.settled(replica)
        replica.close()
        return replica.high_watermark

    async def forget(self, vhost: str, name: str) -> None:
        """Stop following and delete the copy (the queue was deleted or moved away)."""
        await self.stop(vhost, name)
        await asyncio.to_thread(shutil.rmtree, self._directories(vhost, name), True)

    async def stop_all(self) -> None:
        for vhost, name in list(self.driver.following()):
            await self.stop(vhost, name)
        await self._transport.close()

    def copy_status(self, vhost: str, name: str) -> tuple[int, int] | None:
        """(log end, last epoch) of this node's copy, or None."""
        replica = self.driver.replica((vhost, name))
        if replica is None or replica.closed:
            return None
        return replica.next_offset, replica.last_epoch

    def view(self, vhost: str, name: str) -> FollowerView | None:
        """This node's copy as a replay source, or None: not following it, or no high
        watermark heard since the copy was opened (a restart), so nothing is known to
        be committed."""
        replica = self.driver.replica((vhost, name))
        if replica is None or replica.closed or replica.high_watermark is None:
            return None
        return FollowerView(replica, replica.high_watermark)
