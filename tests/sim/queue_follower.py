"""`FollowerLoop`: one follower replica and its fetch loop on a simulated node.

It mirrors `QueueFollowers._run` / `_fetch_once` / `_take`
(logbroker/cluster/queue_followers.py) step by step, driven by ticks instead of
awaits: read the queue's record from this node's metadata before every fetch;
fetch from the leader it names with (epoch, next offset, last epoch, acked
version, high watermark); on `stream` append the batches, make them durable
(the real loop awaits an fsync thread: here the sync lands a random number of
ticks later, and a crash before it loses the writes), then take the acked
ranges, the high watermark and the log start; on `truncate` / `reset` apply
them to the `FollowerReplica`; on `refused` or nothing to fetch from, wait
`BACKOFF_MIN`; on a timeout, back off doubling up to `BACKOFF_MAX`.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable

from logbroker.metadata import MetadataState
from replication.queue.epoch_history import EpochHistory
from replication.queue.follower_replica import FollowerReplica
from replication.queue.replication_leader import Truncate
from segments.memory_filesystem import MemoryFileSystem
from tests.sim.queue_leader import QUEUE_LOG_CONFIG
from tests.sim.queue_messages import Fetch, FetchAnswer

VHOST = "/"
FETCH_TIMEOUT = 15  # ticks
BACKOFF_MIN = 1
BACKOFF_MAX = 8


class FollowerLoop:
    def __init__(self, node: str, queue: str, fs: MemoryFileSystem, directory: str,
                 rng: random.Random, max_sync_delay: int) -> None:
        self.node = node
        self.queue = queue
        self.replica = FollowerReplica.open(fs, directory, QUEUE_LOG_CONFIG)
        self._rng = rng
        self._max_sync_delay = max_sync_delay
        self._waiting: tuple[int, int] | None = None  # (request, deadline)
        self._syncing: tuple[int, FetchAnswer] | None = None  # (done at, the answer)
        self._sleep_until = 0
        self._backoff = BACKOFF_MIN
        self.stats = {"truncations": 0, "resets": 0}

    def tick(self, now: int, state: MetadataState, request_id: Callable[[], int],
             send: Callable[[Fetch], None]) -> None:
        if self._syncing is not None:
            if now < self._syncing[0]:
                return
            self._finish_take(self._syncing[1])
            self._syncing = None
            self._backoff = BACKOFF_MIN
        if self._waiting is not None:
            if now < self._waiting[1]:
                return
            self._waiting = None  # FETCH_TIMEOUT_S: an error, back off
            self._sleep_until = now + self._backoff
            self._backoff = min(BACKOFF_MAX, self._backoff * 2)
        if now < self._sleep_until:
            return
        record = state.queue(VHOST, self.queue)
        if record is None or record.leader_node is None or record.leader_node == self.node:
            self._sleep_until = now + BACKOFF_MIN
            return
        replica = self.replica
        header = {"v": VHOST, "q": self.queue, "e": record.epoch, "n": replica.next_offset,
                  "le": replica.last_epoch, "ls": replica.log_start,
                  "av": replica.acked_version,
                  "hw": replica.high_watermark or 0}
        request = request_id()
        self._waiting = (request, now + FETCH_TIMEOUT)
        send(Fetch(self.node, record.leader_node, request, self.queue, header))

    def on_answer(self, answer: FetchAnswer, now: int) -> None:
        if self._waiting is None or self._waiting[0] != answer.request:
            return  # an answer to a fetch given up on, or duplicated by the network
        self._waiting = None
        self._backoff = BACKOFF_MIN
        replica = self.replica
        if answer.op == "stream":
            epochs = EpochHistory.from_json(answer.header["epochs"]).entries
            if answer.blobs:
                replica.append(answer.blobs, epochs)
                self._syncing = (now + self._rng.randint(0, self._max_sync_delay), answer)
                return  # the next tick finishes it (at the earliest)
            self._finish_take(answer)
        elif answer.op == "truncate":
            replica.truncate(Truncate(int(answer.header["to"]), int(answer.header["epoch"])))
            self.stats["truncations"] += 1
        elif answer.op == "reset":
            replica.reset(int(answer.header["start"]))
            self.stats["resets"] += 1
        else:
            self._sleep_until = now + BACKOFF_MIN  # refused: not progressed

    def _finish_take(self, answer: FetchAnswer) -> None:
        replica, header = self.replica, answer.header
        if answer.blobs:
            replica.sync()
        if "acked" in header:
            replica.apply_acks([(int(lo), int(hi)) for lo, hi in header["acked"]],
                               int(header["av"]))
        replica.high_watermark = max(replica.high_watermark or 0, int(header["hw"]))
        with contextlib.suppress(Exception):  # as the wiring does
            replica.follow_log_start(int(header["start"]))

    def stop(self) -> int | None:
        """QueueFollowers.stop: let a sync under way finish, close, give the hw known
        (None: none heard since the replica was opened)."""
        if self._syncing is not None:
            self._finish_sync_only()
        self.replica.close()
        return self.replica.high_watermark

    def _finish_sync_only(self) -> None:
        self.replica.sync()
        self._syncing = None
