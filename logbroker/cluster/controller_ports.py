"""The controller driver's ports on asyncio: the real node's side of controller_driver.py.

Each port turns one effect into an asyncio task or timer whose outcome calls
back into the driver; none decides anything. `TaskSet` holds every task
they start, so stopping the node cancels them all (a cancelled task calls
nothing back).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from logbroker.cluster.cluster_rpc import ClusterRpc
from logbroker.cluster.controller_driver import (
    Done,
    Handovers,
    MetadataView,
    Proposer,
    StatusAsker,
    Timers,
)
from logbroker.cluster.envelope import Envelope
from logbroker.cluster.replicated_metadata import ReplicatedMetadata
from logbroker.errors import BrokerError
from logbroker.metadata import Command, MetadataState
from replication.queue.failover import ReplicaStatus
from segments.clock import Clock

logger = logging.getLogger(__name__)


class TaskSet:
    """Tasks started for the cluster node, cancelled together when it stops."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[Any]] = set()

    def spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("cluster task failed: %s", task.exception())

    async def cancel_all(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


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

    def __init__(self, node_name: str, rpc: ClusterRpc,
                 local: Callable[[str, str], Mapping[str, int] | None], tasks: TaskSet) -> None:
        self._node_name = node_name
        self._rpc = rpc
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
            answer = await self._rpc.call(member, Envelope("r.status", {"v": vhost, "q": queue}),
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


class LoopTimers:
    """Timers on the running event loop, in the clock's monotonic milliseconds."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._handles: set[asyncio.TimerHandle] = set()

    def call_at(self, at_ms: int, action: Callable[[], None]) -> None:
        delay_s = max(0, at_ms - self._clock.monotonic_ms()) / 1000
        handle: asyncio.TimerHandle

        def fire() -> None:
            self._handles.discard(handle)
            action()
        handle = asyncio.get_running_loop().call_later(delay_s, fire)
        self._handles.add(handle)

    def cancel_all(self) -> None:
        for handle in self._handles:
            handle.cancel()
        self._handles.clear()


@dataclass
class AsyncioControllerPorts:
    metadata: MetadataView
    proposer: Proposer
    status: StatusAsker
    handovers: Handovers
    timers: Timers
