"""`QueueFollowers`: the follower replicas on this node and their fetch loops.

Theory of operation. For every replicated queue this node is a member of
but does not lead, one task fetches from the leader named in the metadata
(`r.fetch`, see `replica_feed`), applies the answer to its
`FollowerReplica` (append and make durable, cut a divergent tail, start
over below the leader's log start, take the acked range set) and fetches
again; the next fetch reports what is now durable. The task reads the
queue's record before every fetch, so a new leader or epoch is followed at
once. Errors (leader unreachable, refused while the metadata catches up)
back off, bounded, and retry: the loop ends only when the broker stops it.

A follower that is far behind the leader (more than `CATCH_UP_LAG` below
the high watermark: it is copying a backlog, and is not in sync, so no
confirm waits for it) rests after each fetch as long as that fetch took.
The copy then uses about half of what the two nodes can give it, and the
queue's publishers keep the rest: RabbitMQ paces a mirror's sync in batches
(`ha-sync-batch-size`), Kafka throttles catching-up replicas with quotas.

Clients read a copy only through `view` (replay served by an in-sync
follower, up to the high watermark it heard: `follower_view`). Promotion
closes the replica (`stop`) and the broker opens the queue shell on the same
directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from typing import TYPE_CHECKING

from logbroker.cluster.envelope import Envelope
from logbroker.cluster.follower_view import FollowerView
from logbroker.errors import BrokerError
from replication.queue.epoch_history import EpochHistory
from replication.queue.follower_replica import FollowerReplica
from replication.queue.replication_leader import Truncate

if TYPE_CHECKING:
    from logbroker.cluster.cluster_node import ClusterNode

logger = logging.getLogger(__name__)
Key = tuple[str, str]
FETCH_TIMEOUT_S = 5.0
BACKOFF_MIN_S = 0.05
BACKOFF_MAX_S = 1.0
CATCH_UP_LAG = 10_000  # messages below the high watermark: copying a backlog
CATCH_UP_REST_MAX_S = 0.5


class QueueFollowers:
    def __init__(self, node: ClusterNode) -> None:
        self.node = node
        self._replicas: dict[Key, FollowerReplica] = {}
        self._tasks: dict[Key, asyncio.Future[None]] = {}
        self._syncing: dict[Key, asyncio.Future[None]] = {}
        self._wake: dict[Key, asyncio.Event] = {}

    # -------------------------------------------------- QueueReplicas protocol

    def following(self) -> set[Key]:
        return set(self._tasks)

    def follow(self, vhost: str, name: str) -> None:
        """Follow the queue (its record changed: a waiting loop retries at once)."""
        key = (vhost, name)
        if key in self._tasks:
            self._wake[key].set()
            return
        self._wake[key] = asyncio.Event()
        directory = self.node.broker.queue_directory(vhost, name)
        self._replicas[key] = FollowerReplica.open(self.node.fs, directory)
        self._tasks[key] = asyncio.ensure_future(self._run(key))
        logger.info("node %s follows queue %r in vhost %r", self.node.node_name, name, vhost)

    async def stop(self, vhost: str, name: str) -> int | None:
        """Stop following and close the replica; return the high watermark it knew
        (None: it heard none since it was opened)."""
        key = (vhost, name)
        task = self._tasks.pop(key, None)
        self._wake.pop(key, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        syncing = self._syncing.pop(key, None)
        if syncing is not None:  # a thread may still be fsyncing: let it finish first
            await asyncio.gather(syncing, return_exceptions=True)
        replica = self._replicas.pop(key, None)
        if replica is None:
            return None
        replica.close()
        return replica.high_watermark

    async def forget(self, vhost: str, name: str) -> None:
        """Stop following and delete the copy (the queue was deleted or moved away)."""
        await self.stop(vhost, name)
        directory = self.node.broker.queue_directory(vhost, name)
        await asyncio.to_thread(shutil.rmtree, directory, True)

    async def stop_all(self) -> None:
        for vhost, name in list(self._tasks):
            await self.stop(vhost, name)

    def copy_status(self, vhost: str, name: str) -> tuple[int, int] | None:
        """(log end, last epoch) of this node's copy, or None."""
        replica = self._replicas.get((vhost, name))
        if replica is None or replica.closed:
            return None
        return replica.next_offset, replica.last_epoch

    def view(self, vhost: str, name: str) -> FollowerView | None:
        """This node's copy as a replay source, or None: not following it, or no high
        watermark heard since the copy was opened (a restart), so nothing is known to
        be committed."""
        replica = self._replicas.get((vhost, name))
        if replica is None or replica.closed or replica.high_watermark is None:
            return None
        return FollowerView(replica, replica.high_watermark)

    # ---------------------------------------------------------------- loop

    async def _run(self, key: Key) -> None:
        backoff = BACKOFF_MIN_S
        # `stop` removes the key before cancelling: Python 3.11's wait_for can swallow a
        # cancellation that races with the result it waited for.
        while key in self._tasks:
            try:
                progressed = await self._fetch_once(key)
                backoff = BACKOFF_MIN_S
                if not progressed:
                    await self._pause(key, BACKOFF_MIN_S)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if not isinstance(error, BrokerError):
                    logger.warning("replica of queue %r: %s", key[1], error)
                await self._pause(key, backoff)
                backoff = min(BACKOFF_MAX_S, backoff * 2)

    async def _rest(self, key: Key, seconds: float) -> None:
        """Copying a backlog: leave the two nodes `seconds` for the queue's publishers."""
        await self._pause(key, seconds)

    async def _pause(self, key: Key, seconds: float) -> None:
        """Sleep, unless the queue's record changes first (a new leader to fetch from)."""
        wake = self._wake.get(key)
        if wake is None:
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), seconds)
        wake.clear()

    async def _fetch_once(self, key: Key) -> bool:
        """One fetch and what follows; False when there was nothing to fetch from."""
        vhost, name = key
        record = self.node.metadata.state.queue(vhost, name)
        replica = self._replicas[key]
        if (record is None or record.leader_node is None
                or record.leader_node == self.node.node_name):
            return False
        header = {"v": vhost, "q": name, "e": record.epoch, "n": replica.next_offset,
                  "le": replica.last_epoch, "ls": replica.log_start,
                  "av": replica.acked_version,
                  "hw": replica.high_watermark or 0}
        started = time.monotonic()
        answer = await self.node.rpc.call(record.leader_node, Envelope("r.fetch", header),
                                          FETCH_TIMEOUT_S)
        if answer.op == "stream":
            await self._take(key, replica, answer)
            if int(answer.header["hw"]) - replica.next_offset > CATCH_UP_LAG:
                await self._rest(key, min(CATCH_UP_REST_MAX_S, time.monotonic() - started))
            return True
        if answer.op == "truncate":
            cut = replica.truncate(Truncate(int(answer.header["to"]),
                                            int(answer.header["epoch"])))
            logger.info("replica of queue %r cut its log at %d (diverged)", name, cut)
            return True
        if answer.op == "reset":
            replica.reset(int(answer.header["start"]))
            return True
        logger.debug("replica of queue %r: %s", name, answer.header.get("reason"))
        return False

    async def _take(self, key: Key, replica: FollowerReplica, answer: Envelope) -> None:
        header = answer.header
        epochs = EpochHistory.from_json(header["epochs"]).entries
        if answer.blobs:
            replica.append(answer.blobs, epochs)
            syncing = asyncio.ensure_future(asyncio.to_thread(replica.sync))
            self._syncing[key] = syncing
            await asyncio.shield(syncing)
            self._syncing.pop(key, None)
        if "acked" in header:
            replica.apply_acks([(int(lo), int(hi)) for lo, hi in header["acked"]],
                               int(header["av"]))
        replica.high_watermark = max(replica.high_watermark or 0, int(header["hw"]))
        with contextlib.suppress(Exception):
            replica.follow_log_start(int(header["start"]))
