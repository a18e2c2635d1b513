"""The controller driver's ports on asyncio: the real node's side of controller_driver.py.

Each port turns one effect into an asyncio task or timer whose outcome calls
back into the driver; none decides anything. A `TaskSet` (asyncio_ports.py)
holds every task they start, so stopping the node cancels them all (a
cancelled task calls nothing back).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from logbroker.cluster.asyncio_ports import TaskSet
from logbroker.cluster.cluster_rpc import ClusterRpc
from logbroker.cluster.controller_driver import (
    Done,
    Handovers,
    Heartbeats,
    MetadataView,
    Proposer,
    StatusAsker,
    Timers,
)
from logbroker.cluster.envelope import Envelope
from logbroker.cluster.liveness import NodeAddress
from logbroker.cluster.replicated_metadata import ReplicatedMetadata
from logbroker.errors import BrokerError
from logbroker.metadata import Command, MetadataState
from replication.queue.failover import ReplicaStatus

RpcCall = Callable[[str, Envelope, float], Awaitable[Envelope]]  # `ClusterRpc.call`


async def _reporting(work: Awaitable[Any], on_done: Done) -> None:
    try:
        await work
    except BrokerError as error:
        on_done(error.reply_text)
        return
    except Exception as error:  # any failure is the step's answer
        on_done(str(error) or type(error).__name__)
        return
    on_done(None)


class RaftMetadataView(MetadataView):
    def __init__(self, metadata: ReplicatedMetadata) -> None:
        self._metadata = metadata

    def leading(self) -> bool:
        driver = self._metadata.driver
        return driver is not None and driver.is_leader

    def leader(self) -> str | None:
        driver = self._metadata.driver
        return driver.leader_id if driver is not None else None

    def members(self) -> frozenset[str]:
        driver = self._metadata.driver
        return frozenset(driver.membership.nodes) if driver is not None else frozenset()

    def state(self) -> MetadataState:
        return self._metadata.state

    def applied_index(self) -> int:
        driver = self._metadata.driver
        return driver.applied_index if driver is not None else 0


class TaskProposer(Proposer):
    def __init__(self, propose: Callable[[Command], Awaitable[None]], tasks: TaskSet) -> None:
        self._propose = propose
        self._tasks = tasks

    def propose(self, command: Command, on_done: Done) -> None:
        self._tasks.spawn(_reporting(self._propose(command), on_done))


class RpcStatusAsker:
    """`r.status` over the cluster RPC; this node's own copy is read in place."""

    def __init__(self, node_name: str, call: RpcCall,
                 local: Callable[[str, str], Mapping[str, int] | None], tasks: TaskSet) -> None:
        self._node_name = node_name
        self._call = call
        self._local = local
        self._tasks = tasks

    def ask_status(self, member: str, vhost: str, queue: str, timeout_ms: int,
                   on_answer: Callable[[ReplicaStatus | None], None]) -> None:
        if member == self._node_name:
            on_answer(_status(member, self._local(vhost, queue)))
            return
        self._tasks.spawn(self._ask(member, vhost, queue, timeout_ms, on_answer))

    async def _ask(self, member: str, vhost: str, queue: str, timeout_ms: int,
                   on_answer: Callable[[ReplicaStatus | None], None]) -> None:
        try:
            answer = await self._call(member, Envelope("r.status", {"v": vhost, "q": queue}),
                                      timeout_ms / 1000)
        except BrokerError:
            on_answer(None)
            return
        on_answer(_status(member, answer.header if answer.op == "ok" else None))


def _status(member: str, header: Mapping[str, Any] | None) -> ReplicaStatus | None:
    if header is None:
        return None
    return ReplicaStatus(member, int(header["log_end"]), int(header["last_epoch"]),
                         int(header["started_ms"]))


@dataclass
class TaskHandovers(Handovers):
    sync_queue: Callable[[str, str], Awaitable[None]]
    transfer_queue: Callable[[str, str, str | None], Awaitable[Any]]
    tasks: TaskSet

    def sync(self, vhost: str, queue: str, on_done: Done) -> None:
        self.tasks.spawn(_reporting(self.sync_queue(vhost, queue), on_done))

    def transfer(self, vhost: str, queue: str, target: str | None, on_done: Done) -> None:
        self.tasks.spawn(_reporting(self.transfer_queue(vhost, queue, target), on_done))


class RpcHeartbeats:
    """`cluster.heartbeat`, a notice: a lost one is made up for by the next."""

    def __init__(self, rpc: ClusterRpc) -> None:
        self._rpc = rpc

    def send(self, leader: str, address: NodeAddress) -> None:
        self._rpc.notify(leader, Envelope("cluster.heartbeat", {
            "host": address.host, "cluster_port": address.cluster_port,
            "amqp_port": address.amqp_port, "http_port": address.http_port,
            "host_id": address.host_id, "zone": address.zone}))


@dataclass
class AsyncioControllerPorts:
    metadata: MetadataView
    proposer: Proposer
    status: StatusAsker
    handovers: Handovers
    heartbeats: Heartbeats
    timers: Timers
