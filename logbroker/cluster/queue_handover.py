"""`QueueHandover`: moving a replicated queue's leadership on purpose, without loss.

Theory of operation. Only the current leader hands over (other nodes forward
`q.transfer` to it): it pauses publishes on the queue (they are refused
with a reason, so publishers with confirms see a nack and retry), waits
until the target follower has persisted everything the leader has written
(bounded by `CATCH_UP_TIMEOUT_S`), then proposes `ElectQueueLeader` for its
epoch with the target first in the in-sync set and itself kept in it. The
target then opens the queue from its copy, which holds every message, and
this node follows it. Messages delivered here and not acked come back
redelivered there. If the election does not happen, publishing resumes.

Used by `logbroker queue transfer-leader`, by `rebalance-leaders`
(`leader_rebalance`), and by a controlled shutdown (SIGTERM), which hands
every queue this node leads to its most advanced in-sync follower that is
up, or, under `ha-promote-on-shutdown: always`, to any follower that is up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from logbroker.cluster.cluster_rpc import ClusterRpc
from logbroker.cluster.envelope import Envelope
from logbroker.cluster.local_queues import LocalQueues
from logbroker.errors import NOT_FOUND, PRECONDITION_FAILED, BrokerError
from logbroker.leader_rebalance import LedQueue, plan_rebalance
from logbroker.metadata import Command, ElectQueueLeader, MetadataState, QueueRecord
from logbroker.queue.replication_gate import ReplicationGate
from segments.clock import SYSTEM_CLOCK, Clock

logger = logging.getLogger(__name__)
CATCH_UP_TIMEOUT_S = 5.0
TRANSFER_TIMEOUT_S = 15.0
SHUTDOWN_TIMEOUT_S = 20.0
# How long a peer that said it is stopping is no handover target: longer than its
# shutdown may take, so a node that restarts soon after is a target again.
LEAVING_FOR_S = 2 * SHUTDOWN_TIMEOUT_S
LEAVING_NOTICE_S = 0.1  # time for the notices of peers stopped at the same moment


class ElectionCounts(Protocol):
    """The controller's failover counters (`QueueFailover`), shown with the handovers."""

    @property
    def elections(self) -> int: ...

    @property
    def out_of_sync_promotions(self) -> int: ...


@dataclass(frozen=True, slots=True)
class HandoverPorts:
    """What `QueueHandover` needs of its node, which builds this port (never the node)."""

    node_name: str
    rpc: ClusterRpc
    queues: Callable[[], LocalQueues]  # the broker, once the node started
    state: Callable[[], MetadataState]  # the metadata as applied here
    propose: Callable[[Command], Awaitable[None]]  # a metadata command, until committed
    connected_peers: Callable[[], frozenset[str]]  # the nodes whose cluster link is up
    failover: Callable[[], ElectionCounts]
    clock: Clock = SYSTEM_CLOCK


class QueueHandover:
    def __init__(self, ports: HandoverPorts) -> None:
        self._ports = ports
        self._clock = ports.clock
        self.handovers = 0
        self._leaving: dict[str, int] = {}  # peer -> until when (monotonic ms)
        ports.rpc.handle("q.transfer", self._transfer_request)
        ports.rpc.on_notice("cluster.leaving", self._peer_leaving)
        ports.rpc.handle("q.sync", self._sync_request)

    # ------------------------------------------------------------- any node

    async def transfer(self, vhost: str, name: str, target: str | None) -> str:
        """Move the queue's leadership to `target` (None: the best in-sync follower);
        return the new leader. Forwarded to the leader node if that is not this one."""
        record = self._record(vhost, name)
        leader = record.leader_node
        if leader is None or not record.replicated:
            raise BrokerError(PRECONDITION_FAILED, f"queue '{name}' in vhost '{vhost}' is "
                              "not replicated: it has no other node to lead it")
        if leader == self._ports.node_name:
            return await self.hand_over(vhost, name, target, always=False)
        answer = await self._ports.rpc.call(leader, Envelope("q.transfer", {
            "v": vhost, "q": name, "to": target}), TRANSFER_TIMEOUT_S)
        return str(answer.header["leader"])

    async def sync(self, vhost: str, name: str) -> None:
        await self._sync_action(vhost, name, "sync")

    async def cancel_sync(self, vhost: str, name: str) -> None:
        await self._sync_action(vhost, name, "cancel_sync")

    async def _sync_action(self, vhost: str, name: str, action: str) -> None:
        record = self._record(vhost, name)
        if record.leader_node is None or not record.replicated:
            raise BrokerError(PRECONDITION_FAILED, f"queue '{name}' in vhost '{vhost}' is "
                              "not replicated: there is nothing to synchronise")
        if record.leader_node != self._ports.node_name:
            await self._ports.rpc.call(record.leader_node, Envelope("q.sync", {
                "v": vhost, "q": name, "action": action}), TRANSFER_TIMEOUT_S)
            return
        shell = self._ports.queues().queue(vhost, name)
        gate = shell.replication if shell is not None else None
        if gate is None:
            raise BrokerError(PRECONDITION_FAILED, f"queue '{name}' in vhost '{vhost}' is "
                              f"not open on its leader node {self._ports.node_name} yet")
        if gate.leader.members != record.members:  # a member added a moment ago
            gate.moved(lambda: gate.leader.set_members(record.members, record.in_sync,
                                                       self._clock.wall_ms()))
        members = gate.leader.request_sync() if action == "sync" else gate.leader.cancel_sync()
        gate.changes.notify()  # waiting fetches get their new verdict now
        logger.info("queue %r in vhost %r: %s for %s", name, vhost, action,
                    ", ".join(members) or "nobody (every member is in sync)")

    async def _sync_request(self, peer: str, envelope: Envelope) -> Envelope:
        header = envelope.header
        await self._sync_action(str(header["v"]), str(header["q"]), str(header["action"]))
        return Envelope("ok")

    def replication_counters(self) -> dict[str, int]:
        failover = self._ports.failover()
        return {"elections": failover.elections,
                "out_of_sync_promotions": failover.out_of_sync_promotions,
                "handovers": self.handovers}

    async def rebalance(self) -> list[dict[str, str]]:
        """Spread replicated queue leaders evenly over the hosts, then over the workers
        of each host, among the nodes that are up."""
        state = self._ports.state()
        live = [n.name for n in state.cluster_nodes() if n.up]
        hosts = {n.name: n.host_id for n in state.cluster_nodes()}
        queues = [LedQueue(v.name, q.name, q.leader_node, q.in_sync)
                  for v in state.vhosts() for q in state.queues(v.name)
                  if q.replicated and q.leader_node is not None]
        moved = []
        for move in plan_rebalance(queues, live, hosts):
            try:
                leader = await self.transfer(move.vhost, move.name, move.target)
            except BrokerError as error:
                logger.warning("rebalance: queue %r stays on %s: %s", move.name, move.source,
                               error.reply_text)
                continue
            moved.append({"vhost": move.vhost, "name": move.name, "from": move.source,
                          "to": leader})
        return moved

    async def _transfer_request(self, peer: str, envelope: Envelope) -> Envelope:
        header = envelope.header
        target = header.get("to")
        leader = await self.hand_over(str(header["v"]), str(header["q"]),
                                      None if target is None else str(target), always=False)
        return Envelope("ok", {"leader": leader})

    # ------------------------------------------------------------ the leader

    async def hand_over(self, vhost: str, name: str, target: str | None,
                        always: bool) -> str:
        record = self._record(vhost, name)
        shell = self._ports.queues().queue(vhost, name)
        gate = shell.replication if shell is not None else None
        if gate is None or record.leader_node != self._ports.node_name:
            raise BrokerError(PRECONDITION_FAILED, f"node {self._ports.node_name} does not lead "
                              f"queue '{name}' in vhost '{vhost}' (it moved meanwhile)")
        chosen = self._target(record, gate, target, always)
        gate.pause(f"queue '{name}' is moving to node {chosen}")
        try:
            await self._wait_caught_up(gate, chosen)
            in_sync = (chosen, *(n for n in record.in_sync if n != chosen))
            await self._ports.propose(ElectQueueLeader(
                vhost, name, record.epoch, chosen, in_sync,
                out_of_sync=chosen not in record.in_sync))
        except BaseException:
            gate.resume()
            raise
        self.handovers += 1
        logger.info("queue %r in vhost %r handed over to %s (epoch %d)", name, vhost, chosen,
                    record.epoch + 1)
        return chosen

    def _target(self, record: QueueRecord, gate: ReplicationGate, wanted: str | None,
                always: bool) -> str:
        connected = self._ports.connected_peers()
        up = {n.name for n in self._ports.state().cluster_nodes() if n.up}
        leaving = self._peers_leaving()
        followers = [m for m in record.members if m != self._ports.node_name
                     and m in connected and m in up and m not in leaving]
        eligible = [m for m in followers if always or m in record.in_sync]
        if wanted is not None:
            if wanted not in record.members:
                raise BrokerError(PRECONDITION_FAILED, f"node {wanted} is not a member of "
                                  f"queue '{record.name}' ({', '.join(record.members)})")
            if wanted not in eligible:
                raise BrokerError(PRECONDITION_FAILED, f"node {wanted} cannot lead queue "
                                  f"'{record.name}' now: it is down or not in sync")
            return wanted
        if not eligible:
            raise BrokerError(PRECONDITION_FAILED, f"queue '{record.name}' has no in-sync "
                              "follower that is up to hand over to")
        return max(eligible, key=lambda m: (gate.leader.progress(m) or _NO_PROGRESS
                                            ).persisted_end)

    async def _wait_caught_up(self, gate: ReplicationGate, follower: str) -> None:
        deadline_ms = self._clock.monotonic_ms() + int(CATCH_UP_TIMEOUT_S * 1000)
        while not gate.caught_up(follower):
            remaining = (deadline_ms - self._clock.monotonic_ms()) / 1000
            if remaining <= 0 or gate.fenced is not None:
                raise BrokerError(PRECONDITION_FAILED, f"node {follower} did not catch up "
                                  f"within {CATCH_UP_TIMEOUT_S:g} s")
            await gate.changes.wait(min(remaining, 0.1))

    # ------------------------------------------------------------- shutdown

    async def hand_over_all(self) -> None:
        """Controlled shutdown: every replicated queue led here goes to a follower first.

        The peers hear first that this node is stopping, so none of them hands it a
        queue meanwhile (nodes stopped together would pass queues back and forth)."""
        peers = self._ports.connected_peers()
        for peer in peers:
            self._ports.rpc.notify(peer, Envelope("cluster.leaving", {}))
        if peers:
            await asyncio.sleep(LEAVING_NOTICE_S)
        work = []
        for shell in self._ports.queues().all_queues():
            if shell.capabilities().replicated:
                always = self._promote_on_shutdown(shell.settings.vhost, shell.name) == "always"
                work.append(self._hand_over_quietly(shell.settings.vhost, shell.name, always))
        if work:
            await asyncio.wait_for(asyncio.gather(*work), SHUTDOWN_TIMEOUT_S)

    async def _hand_over_quietly(self, vhost: str, name: str, always: bool) -> None:
        try:
            await self.hand_over(vhost, name, None, always)
        except BrokerError as error:
            logger.warning("shutdown: queue %r in vhost %r stays here: %s", name, vhost,
                           error.reply_text)

    def _peer_leaving(self, peer: str, _envelope: Envelope) -> None:
        self._leaving[peer] = self._clock.monotonic_ms() + int(LEAVING_FOR_S * 1000)

    def _peers_leaving(self) -> set[str]:
        now = self._clock.monotonic_ms()
        for peer in [p for p, until in self._leaving.items() if until <= now]:
            del self._leaving[peer]
        return set(self._leaving)

    def _promote_on_shutdown(self, vhost: str, name: str) -> str:
        definition = self._ports.state().queue_policy_definition(vhost, name)
        return str(definition.get("ha-promote-on-shutdown", "when-synced"))

    def _record(self, vhost: str, name: str) -> QueueRecord:
        record = self._ports.state().queue(vhost, name)
        if record is None:
            raise BrokerError(NOT_FOUND, f"no queue '{name}' in vhost '{vhost}'")
        return record


class _NoProgress:
    persisted_end = -1


_NO_PROGRESS = _NoProgress()
