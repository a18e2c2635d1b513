"""`ReplicaMover`: the controller keeps queues' replica sets in line with their policies.

On every controller beat, for each queue with a leader node, the replica
spec its policy and arguments give (`queue_placement.replica_count_or_nodes`)
is compared with its record and the next step (`replica_moves.next_step`)
is taken, one step in flight per queue: adding or dropping members is a
`SetQueuePlacement` for the same leader (a new member follows and copies the
queue; a dropped one deletes its copy), and moving the leader is a handover
(`QueueHandover.transfer`). A move that waits for a new member to catch up
asks the leader, once per epoch and replica set, to `sync` it, so
`ha-sync-mode: manual` does not stall it.
Exclusive queues and queues of nodes that are down are left alone. A scan
runs only when the metadata changed since the last one (or moves are under
way), so an idle cluster with many queues costs nothing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from logbroker.errors import BrokerError
from logbroker.metadata import QueueRecord, SetQueuePlacement
from logbroker.queue_placement import NodeView, PlacementError, replica_count_or_nodes
from logbroker.replica_moves import ReplicaStep, next_step

if TYPE_CHECKING:
    from logbroker.cluster.cluster_node import ClusterNode

logger = logging.getLogger(__name__)
MAX_MOVES_IN_FLIGHT = 64


class ReplicaMover:
    def __init__(self, node: ClusterNode) -> None:
        self.node = node
        self._moving: dict[tuple[str, str], asyncio.Future[None]] = {}
        # sync asked for, per queue: (epoch, replica set), so it is asked once per change
        self._synced: dict[tuple[str, str], tuple[int, tuple[str, ...]]] = {}
        self._scanned_index = -1  # the metadata scanned last: unchanged, nothing to do

    def scan(self) -> None:
        index = self.node.driver.applied_index
        if index == self._scanned_index and not self._moving:
            return  # every step depends on the metadata only
        self._scanned_index = index
        state = self.node.metadata.state
        nodes = [NodeView(n.name, n.up) for n in state.cluster_nodes()]
        up = {view.name for view in nodes if view.up}
        counts = state.queue_member_counts()
        for vhost in state.vhosts():
            for record in state.queues(vhost.name):
                key = (vhost.name, record.name)
                if (len(self._moving) >= MAX_MOVES_IN_FLIGHT or key in self._moving
                        or record.leader_node not in up or record.exclusive):
                    continue
                step = self._step(record, nodes, counts)
                if step is not None and step.kind == "sync":
                    if self._synced.get(key) == (record.epoch, record.members):
                        continue
                    self._synced[key] = (record.epoch, record.members)
                if step is not None:
                    self._start(key, record, step)

    def _start(self, key: tuple[str, str], record: QueueRecord, step: ReplicaStep) -> None:
        task = asyncio.ensure_future(self._take(record, step))
        self._moving[key] = task

        def done(_: asyncio.Future[None]) -> None:
            self._moving.pop(key, None)
        task.add_done_callback(done)

    def _step(self, record: QueueRecord, nodes: list[NodeView],
              counts: dict[str, int]) -> ReplicaStep | None:
        assert record.leader_node is not None
        state = self.node.metadata.state
        try:
            spec = replica_count_or_nodes(
                record.arguments, state.queue_policy_definition(record.vhost, record.name))
        except PlacementError:
            return None  # the policy is broken: leave the queue as it is
        return next_step(spec, record.leader_node, record.members, record.in_sync, nodes,
                         counts)

    async def stop(self) -> None:
        for task in list(self._moving.values()):
            task.cancel()
        await asyncio.gather(*self._moving.values(), return_exceptions=True)

    async def _take(self, record: QueueRecord, step: ReplicaStep) -> None:
        assert record.leader_node is not None
        try:
            if step.kind == "sync":
                await self.node.handover.sync(record.vhost, record.name)
                return
            if step.kind == "transfer":
                assert step.target is not None
                logger.info("queue %r in vhost %r: leader moves %s -> %s (policy)",
                            record.name, record.vhost, record.leader_node, step.target)
                await self.node.handover.transfer(record.vhost, record.name, step.target)
                return
            logger.info("queue %r in vhost %r: replicas %s -> %s (policy)", record.name,
                        record.vhost, list(record.members), list(step.members))
            await self.node.metadata.propose(SetQueuePlacement(
                record.vhost, record.name, record.leader_node, step.members))
        except BrokerError as error:
            logger.info("queue %r: replica change postponed: %s", record.name,
                        error.reply_text)
