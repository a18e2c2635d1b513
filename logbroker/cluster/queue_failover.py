"""`QueueFailover`: the controller moves queues away from nodes that are down.

Theory of operation. On every controller beat, each replicated queue whose
leader node the metadata records as down gets an election (one at a time
per queue): the controller asks every other member for its copy's status
(`r.status`: log end, last epoch, when its node started), lets
`replication.queue.failover.choose_leader` pick by the seeds' rule, and
proposes `ElectQueueLeader` for the queue's current epoch, so a second
election for the same epoch changes nothing. A queue with no in-sync member
answering stays where it is (unavailable, its record naming the down node)
and is retried on the next beat, unless its policy says
`ha-promote-on-failure: always`: then the best out-of-sync copy is promoted,
which is logged and counted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from logbroker.cluster.envelope import Envelope
from logbroker.errors import BrokerError
from logbroker.metadata import ElectQueueLeader, QueueRecord
from replication.queue.failover import ReplicaStatus, choose_leader

if TYPE_CHECKING:
    from logbroker.cluster.cluster_node import ClusterNode

logger = logging.getLogger(__name__)
STATUS_TIMEOUT_S = 1.0


class QueueFailover:
    def __init__(self, node: ClusterNode) -> None:
        self.node = node
        self._electing: dict[tuple[str, str], asyncio.Future[None]] = {}
        self.out_of_sync_promotions = 0
        self.elections = 0

    def scan(self) -> None:
        """Start an election for every replicated queue led by a node that is down."""
        state = self.node.metadata.state
        down = {record.name for record in state.cluster_nodes() if not record.up}
        if not down:
            return
        for vhost in state.vhosts():
            for record in state.queues(vhost.name):
                key = (vhost.name, record.name)
                if (record.replicated and record.leader_node in down
                        and key not in self._electing):
                    task = asyncio.ensure_future(self._elect(record))
                    self._electing[key] = task
                    task.add_done_callback(self._done_callback(key))

    def _done_callback(self, key: tuple[str, str]) -> Callable[[asyncio.Future[None]], None]:
        def done(task: asyncio.Future[None]) -> None:
            self._electing.pop(key, None)
            if not task.cancelled() and task.exception() is not None:
                logger.warning("queue %r: election failed: %s", key[1], task.exception())
        return done

    async def stop(self) -> None:
        for task in list(self._electing.values()):
            task.cancel()
        await asyncio.gather(*self._electing.values(), return_exceptions=True)

    async def _elect(self, record: QueueRecord) -> None:
        assert record.leader_node is not None
        statuses = await asyncio.gather(*(self._status(member, record)
                                          for member in record.members
                                          if member != record.leader_node))
        promote_always = self._promote_on_failure(record) == "always"
        promotion = choose_leader(record.leader_node, record.in_sync,
                                  [s for s in statuses if s is not None], promote_always)
        if promotion is None:
            logger.warning("queue %r in vhost %r: leader node %s is down and no in-sync "
                           "replica answers; it stays unavailable", record.name, record.vhost,
                           record.leader_node)
            return
        command = ElectQueueLeader(record.vhost, record.name, record.epoch, promotion.leader,
                                   promotion.in_sync, out_of_sync=promotion.out_of_sync)
        try:
            await self.node.metadata.propose(command)
        except BrokerError as error:
            logger.warning("queue %r: election failed: %s", record.name, error.reply_text)
            return
        self.elections += 1
        if promotion.out_of_sync:
            self.out_of_sync_promotions += 1
            logger.warning("queue %r in vhost %r: promoted OUT-OF-SYNC replica on %s "
                           "(ha-promote-on-failure: always); confirmed messages may be lost",
                           record.name, record.vhost, promotion.leader)
        logger.info("queue %r in vhost %r: %s is the new leader (epoch %d), in sync %s",
                    record.name, record.vhost, promotion.leader, record.epoch + 1,
                    list(promotion.in_sync))

    async def _status(self, member: str, record: QueueRecord) -> ReplicaStatus | None:
        node = self.node
        header: dict[str, Any]
        if member == node.node_name:
            local = node.feed.replica_status(record.vhost, record.name)
            if local is None:
                return None
            header = local
        else:
            try:
                answer = await node.rpc.call(member, Envelope("r.status", {
                    "v": record.vhost, "q": record.name}), STATUS_TIMEOUT_S)
            except BrokerError:
                return None
            if answer.op != "ok":
                return None
            header = answer.header
        return ReplicaStatus(member, int(header["log_end"]), int(header["last_epoch"]),
                             int(header["started_ms"]))

    def _promote_on_failure(self, record: QueueRecord) -> str:
        definition = self.node.metadata.state.queue_policy_definition(record.vhost,
                                                                      record.name)
        return str(definition.get("ha-promote-on-failure", "when-synced"))
