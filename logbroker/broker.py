"""The broker of one node: definitions, queues and the message paths between them.

Definitions change only through the metadata store (a log of commands applied
by a pure state machine). After each applied command the broker brings its
runtime objects in line with the resulting events: the exchange router of the
vhost, and a `QueueShell` (log + cursor log + queue core) for every queue
led here. It holds the objects the protocol layers call: `access` (who may
connect and do what, logbroker/access_control.py), `definitions` (declare,
delete, bind), `consuming` (consume, cancel, get) and `publisher`; every queue
they reach, here or led by another node, is a `QueueType`.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import os
import shutil
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from logbroker.access_control import AccessControl
from logbroker.batch_staging import BatchStaging
from logbroker.broker_config import BrokerConfig
from logbroker.connections import ConnectionRegistry
from logbroker.consuming import Consuming
from logbroker.definitions import Definitions
from logbroker.definitions_loaded import DefinitionsLoaded
from logbroker.errors import NOT_FOUND, BrokerError
from logbroker.metadata import (
    Applied,
    Command,
    DeleteQueue,
    MetadataState,
    MetadataStore,
    PolicyChanged,
    QueueDeclared,
    QueueDeleted,
    QueueInSyncChanged,
    QueuePlacementChanged,
    VhostDeleted,
    apply_events,
    bootstrap_commands,
    build_router,
    hash_password,
)
from logbroker.producer_batches import ProducerBatches
from logbroker.publishing import Publisher
from logbroker.queue.queue_settings import settings_from
from logbroker.queue.queue_shell import QueueSettings, QueueShell, ReplicaSetup
from logbroker.queue.queue_type import QueueType, RemoteQueues
from logbroker.queue.replay_view import ReplayView
from logbroker.rate_samples import RateSampler
from logbroker.replica_roles import QueueReplicas, ReplicaRoles
from logbroker.resource_alarms import (
    ResourceAlarms,
    ResourceMonitor,
    Watermarks,
    default_memory_watermark,
)
from logbroker.routing import ExchangeRouter
from segments.clock import SYSTEM_CLOCK, Clock
from segments.filesystem import FileSystem, RealFileSystem

logger = logging.getLogger(__name__)
RETENTION_SWEEP_S = 30.0
MOVE_WAIT_S = 5.0
RELEASE_WAIT_S = 5.0  # a queue's close: a final sync and closing its files


class MetadataLog(Protocol):
    """Where the definitions live: `MetadataStore` on a standalone node, the Raft-replicated
    metadata (`logbroker.cluster`) on a clustered one."""

    @property
    def state(self) -> MetadataState: ...

    def close(self) -> None: ...


Proposer = Callable[[Command], Awaitable[object]]
Placer = Callable[[str, str, Mapping[str, Any], bool], tuple[str, tuple[str, ...]]]
DeliveryCheck = Callable[[str, str, int], bool]


class Broker:
    def __init__(self, config: BrokerConfig, fs: FileSystem, store: MetadataLog,
                 proposer: Proposer | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.clock = clock
        self.fs = fs
        self.store = store
        # Set on a clustered node: definition changes go through the Raft log, and
        # `react` runs when each committed command is applied (on every node).
        self._proposer = proposer
        self._routers: dict[str, ExchangeRouter] = {}
        self._queues: dict[tuple[str, str], QueueShell] = {}
        self._closing: set[asyncio.Future[None]] = set()
        # The closes of dropped queues by directory, until done: a queue declared again
        # meanwhile opens the same directory, whose lock the old instance still holds.
        self._releasing: dict[str, asyncio.Future[None]] = {}
        self._background: set[asyncio.Future[Applied]] = set()
        # Set by the cluster node: queues led elsewhere, reached over the cluster link.
        self.remote: RemoteQueues | None = None
        # Set by the cluster node: where a new queue's leader and replicas go.
        self.placer: Placer | None = None
        # Set by the cluster node (`use_replicas`): replicated queues' roles here.
        self.roles: ReplicaRoles | None = None
        # Whether a login can be checked yet (a starting cluster node may know no users).
        self.definitions_loaded = DefinitionsLoaded(config.node_name, self._can_check_logins,
                                                    clock)
        self.access = AccessControl(config, lambda: self.state, self.definitions_loaded)
        self.definitions = Definitions(lambda: self.state, self.access, self.apply, self)
        self.consuming = Consuming(lambda: self.state, self.access, self)
        # Set by the cluster node: whether the leader of (vhost, queue, epoch) here may
        # deliver now (its leader lease, logbroker.cluster.leader_lease).
        self.may_deliver: DeliveryCheck | None = None
        # Set by the cluster node: whether its lease still holds now. Deliveries are
        # made under the lease, but a pause between making them and writing them to a
        # socket may outlast it: connections check again before they write deliveries.
        self.lease_holds: Callable[[], bool] = lambda: True
        self.publisher = Publisher(self.router, self.queue, lambda: self.remote, clock)
        staging = BatchStaging(lambda: self.state, self.apply, self.publisher, self.queue,
                               self.place_queue, self.released)
        self.producer_batches = ProducerBatches(lambda: self.state, self.apply, self.publisher,
                                                lambda: self.remote, staging, clock)
        self.connections = ConnectionRegistry(config.max_connections, clock)
        # Rates and their history (queues, the node, connections), sampled by a timer of
        # the composition root (rate_sampling.py); other nodes read them over the link.
        self.rates = RateSampler()
        # Told of every applied command after the broker reacted (federation links).
        self.applied_listeners: list[Callable[[Applied], None]] = []
        self._retention_task: asyncio.Future[None] | None = None
        watermarks = Watermarks(
            config.memory_high_watermark_bytes or default_memory_watermark(),
            config.disk_free_limit_bytes,
        )
        self.resources = ResourceMonitor(ResourceAlarms(watermarks), config.data_dir)

    # ------------------------------------------------------------- lifecycle

    @classmethod
    def open(cls, config: BrokerConfig, fs: FileSystem | None = None,
             clock: Clock = SYSTEM_CLOCK) -> Broker:
        """Recover the node's state from `config.data_dir` (call inside the event loop)."""
        fs = fs or RealFileSystem()
        fs.makedirs(config.data_dir)
        password_hash = hash_password(config.default_password, os.urandom(4))
        store = MetadataStore.open(fs, config.data_dir,
                                   bootstrap=bootstrap_commands(password_hash, config.default_user),
                                   clock=clock.wall_ms)
        broker = cls(config, fs, store, clock=clock)
        for command in store.state.restart_cleanup_commands():
            broker._apply(command)  # transient queues and exchanges do not survive a restart
        broker._remove_orphan_queue_directories()
        for vhost in store.state.vhosts():
            for record in store.state.queues(vhost.name):
                broker._open_queue(vhost.name, record.name)
        broker.start_background()
        return broker

    def use_replicas(self, replicas: QueueReplicas,
                     current: Callable[[], bool] | None = None) -> None:
        self.roles = ReplicaRoles(self, replicas, self.config.node_name, current, self.clock)

    def _can_check_logins(self) -> bool:
        if self.roles is None:
            return True  # a standalone node read its definitions in `open`
        # Permissions come last in the bootstrap (vhost, user, permissions): before
        # them, a brand-new cluster would refuse the default user's login or vhost.
        return self.roles.current and bool(self.state.all_permissions())

    def start_background(self) -> None:
        """Resource alarms and the retention sweep (call inside the event loop)."""
        self.resources.start()
        self._retention_task = asyncio.ensure_future(self._sweep_retention())

    def bootstrap_commands(self) -> list[Command]:
        """What a brand-new broker's metadata starts with: the default vhost and user."""
        password_hash = hash_password(self.config.default_password, os.urandom(4))
        return bootstrap_commands(password_hash, self.config.default_user)

    async def close(self) -> None:
        if self._retention_task is not None:
            self._retention_task.cancel()
        await self.resources.stop()
        if self.roles is not None:
            await self.roles.settle()
        await self.settle()
        for shell in list(self._queues.values()):
            await shell.close()
        self._queues.clear()
        self.store.close()

    @property
    def state(self) -> MetadataState:
        return self.store.state

    def router(self, vhost: str) -> ExchangeRouter:
        router = self._routers.get(vhost)
        if router is None:
            router = build_router(self.state, vhost)
            self._routers[vhost] = router
        return router

    def queue(self, vhost: str, name: str) -> QueueShell | None:
        return self._queues.get((vhost, name))

    def endpoint(self, vhost: str, name: str) -> QueueType | None:
        """The queue to consume from or settle on: its shell here, or the endpoint that
        forwards to its leader node (BrokerError 404 naming the node if that is down)."""
        shell = self._queues.get((vhost, name))
        if shell is not None or self.remote is None:
            return shell
        return self.remote.endpoint(vhost, name)

    async def endpoint_when_open(self, vhost: str, name: str) -> QueueType | None:
        """`endpoint`, but a queue this node is just becoming the leader of (a failover
        or handover under way) is waited for, briefly, instead of missing."""
        endpoint = self.endpoint(vhost, name)
        if endpoint is None and self.roles is not None:
            await self.roles.moved(vhost, name, MOVE_WAIT_S)
            endpoint = self.endpoint(vhost, name)
        return endpoint

    def replay_view(self, vhost: str, name: str) -> ReplayView | None:
        """Where a replay of the queue is served on this node: its shell if the queue is
        led here, else this node's copy if the metadata counts it in sync and it has
        heard a high watermark (fetch from follower, `follower_view`); None: neither
        (the caller sends the reader to the leader)."""
        shell = self._queues.get((vhost, name))
        if shell is not None:
            return shell
        record = self.state.queue(vhost, name)
        if (record is None or self.roles is None
                or self.config.node_name not in record.in_sync):
            return None
        return self.roles.replicas.view(vhost, name)

    def queues_of(self, vhost: str) -> list[QueueShell]:
        return [shell for (v, _), shell in self._queues.items() if v == vhost]

    def all_queues(self) -> list[QueueShell]:
        return list(self._queues.values())

    # ---------------------------------------------------------- definitions

    async def apply(self, command: Command) -> Applied:
        """Apply a definition change and bring routers and queues in line with it.

        Awaitable because in a cluster the change returns only once the Raft
        log has committed it (`logbroker.cluster`); a standalone node's store
        has made it durable before this returns either way.
        """
        if self._proposer is not None:
            await self._proposer(command)
            return Applied()
        return self._apply(command)

    def apply_soon(self, command: Command) -> None:
        """Apply `command` from a synchronous callback (an expiry, a last consumer gone)."""
        task = asyncio.ensure_future(self.apply(command))
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Future[Applied]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("background definition change failed: %s", task.exception())

    def _apply(self, command: Command) -> Applied:
        assert isinstance(self.store, MetadataStore), "a clustered node applies through Raft"
        applied = self.store.apply(command)
        self.react(applied)
        return applied

    def react(self, applied: Applied) -> None:
        """Bring routers and queue shells in line with an applied command's events, then
        tell the `applied_listeners` (federation links)."""
        for vhost, router in self._routers.items():
            apply_events(router, self.state, vhost, applied.events)
        for event in applied.events:
            if isinstance(event, QueueDeclared | QueuePlacementChanged):
                self._queue_changed(event.queue.vhost, event.queue.name)
            elif isinstance(event, QueueInSyncChanged):
                self._in_sync_changed(event)
            elif isinstance(event, QueueDeleted):
                self._drop_queue(event.vhost, event.name)
                self._queue_changed(event.vhost, event.name)
            elif isinstance(event, VhostDeleted):
                for name in event.queues:
                    self._drop_queue(event.vhost, name)
                self._routers.pop(event.vhost, None)
            elif isinstance(event, PolicyChanged):
                for name in event.queues:
                    self._refresh_queue_settings(event.vhost, name)
        for listener in self.applied_listeners:
            listener(applied)

    def queue_settings(self, vhost: str, name: str) -> QueueSettings:
        record = self.state.queue(vhost, name)
        if record is None:
            raise BrokerError(NOT_FOUND, f"no queue '{name}' in vhost '{vhost}'")
        arguments = self.state.effective_queue_arguments(vhost, name)
        config = self.config
        return settings_from(vhost, name, record.durable, arguments, config.fsync_policy,
                             config.retention_ms, config.retention_bytes,
                             config.publisher_flow)

    def queue_directory(self, vhost: str, name: str) -> str:
        digest = hashlib.sha256(f"{vhost}\0{name}".encode()).hexdigest()[:32]
        return os.path.join(self.config.data_dir, "queues", digest)

    def place_queue(self, vhost: str, name: str, arguments: Mapping[str, Any],
                    exclusive: bool) -> tuple[str | None, tuple[str, ...]]:
        """(leader node, replica set) for a queue about to be declared; a standalone
        node records none (every queue is local)."""
        if self.placer is None:
            return None, ()
        return self.placer(vhost, name, arguments, exclusive)

    def leads_queue(self, vhost: str, name: str) -> bool:
        """Whether this node runs the queue (standalone: every queue)."""
        record = self.state.queue(vhost, name)
        return record is not None and record.leader_node in (None, self.config.node_name)

    def reconcile(self) -> None:
        """Bring every router and queue shell in line with the whole state (after a
        Raft snapshot replaced it, or when this node starts in a cluster)."""
        self._routers.clear()
        every = {(v.name, q.name): q
                 for v in self.state.vhosts() for q in self.state.queues(v.name)}
        # In a cluster, queues move between leader and follower through `roles`.
        by_roles = set(every) if self.roles is not None else set()
        wanted = {key for key in every if self.leads_queue(*key) and key not in by_roles}
        for vhost, name in list(self._queues):
            key = (vhost, name)
            if key not in every or (key not in wanted and key not in by_roles):
                self._drop_queue(vhost, name)
        for vhost, name in sorted(wanted):
            self._open_queue(vhost, name)
        if self.roles is not None:
            self.roles.sync_all()

    def _queue_changed(self, vhost: str, name: str) -> None:
        if self.roles is not None:
            self.roles.sync(vhost, name)
        elif self.state.queue(vhost, name) is not None:
            self._open_queue(vhost, name)

    def _in_sync_changed(self, event: QueueInSyncChanged) -> None:
        shell = self._queues.get((event.queue.vhost, event.queue.name))
        gate = shell.replication if shell is not None else None
        if self.roles is not None and not self.roles.current:
            # Not dropped: the queue's move waits until the metadata is current, and
            # then hands the record's in-sync set to the gate (RoleMoves: HandInSync).
            self.roles.sync(event.queue.vhost, event.queue.name)
            return
        if gate is not None and gate.leader.epoch == event.queue.epoch:
            gate.moved(lambda: gate.leader.in_sync_committed(event.queue.in_sync))

    def open_queue(self, vhost: str, name: str, high_watermark: int | None) -> None:
        """Open a replicated queue led here (ReplicaRoles), from the `high_watermark` its
        follower replica knew (None: unknown)."""
        self._open_queue(vhost, name, high_watermark)

    async def close_queue(self, vhost: str, name: str, reason: str) -> None:
        """Close a queue's shell, keeping its files (its leadership moved)."""
        shell = self._queues.pop((vhost, name), None)
        if shell is None:
            return
        if shell.replication is not None:
            shell.replication.fence(reason)
        shell.cancel_consumers(leader_moved=True)
        await shell.close()

    async def released(self, vhost: str, name: str) -> None:
        """Wait (at most RELEASE_WAIT_S) until a dropped instance of the queue has closed
        and removed its files, so that declaring it again opens a new, empty queue."""
        closing = self._releasing.get(self.queue_directory(vhost, name))
        if closing is not None:
            await asyncio.wait([closing], timeout=RELEASE_WAIT_S)

    def _open_queue(self, vhost: str, name: str, high_watermark: int | None = None) -> None:
        if (vhost, name) in self._queues or not self.leads_queue(vhost, name):
            return
        closing = self._releasing.get(self.queue_directory(vhost, name))
        if closing is not None:
            # Declared again (or led here again) before the old instance let go of its
            # files; a declare waits for that (`released`), other paths open it after.
            opening = asyncio.ensure_future(
                self._open_when_released(closing, vhost, name, high_watermark))
            self._closing.add(opening)
            return
        replica = self._replica_setup(vhost, name, high_watermark)
        shell = QueueShell.open(self.queue_settings(vhost, name), self.fs,
                                self.queue_directory(vhost, name), replica)
        if replica is not None and shell.replication is not None and self.may_deliver:
            shell.replication.lease = functools.partial(self.may_deliver, vhost, name,
                                                        replica.epoch)
        shell.node_counters = self.publisher.stats.queues
        shell.on_dead_letter = self.publisher.dead_letter
        shell.on_expired = self._queue_expired
        shell.on_unused = self._queue_unused
        self._queues[(vhost, name)] = shell
        # The first pump arms the queue's timer, so x-expires and message TTLs run
        # even if nobody ever consumes from the queue.
        shell.schedule_pump()

    def _replica_setup(self, vhost: str, name: str, high_watermark: int | None
                       ) -> ReplicaSetup | None:
        """How a replicated queue led here opens (None: it is not replicated)."""
        record = self.state.queue(vhost, name)
        if record is None or not record.replicated or self.roles is None:
            return None
        definition = self.state.queue_policy_definition(vhost, name)
        return ReplicaSetup(
            self.config.node_name, record.epoch, record.members, record.in_sync,
            high_watermark, sync_mode=_sync_mode(definition),
            sync_batch_size=int(definition.get("ha-sync-batch-size", 4096)))

    async def _open_when_released(self, closing: asyncio.Future[None], vhost: str, name: str,
                                  high_watermark: int | None) -> None:
        await asyncio.wait([closing])
        if self.state.queue(vhost, name) is not None:
            self._open_queue(vhost, name, high_watermark)

    def _drop_queue(self, vhost: str, name: str) -> None:
        shell = self._queues.pop((vhost, name), None)
        if shell is None:
            return
        shell.cancel_consumers()
        closing = asyncio.ensure_future(_close_and_remove(shell))
        self._closing.add(closing)
        self._releasing[shell.directory] = closing

        def released(_: asyncio.Future[None]) -> None:
            if self._releasing.get(shell.directory) is closing:
                del self._releasing[shell.directory]

        closing.add_done_callback(released)

    async def settle(self) -> None:
        """Wait until queues being deleted have closed (tests, shutdown)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        while self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)
            self._closing = {task for task in self._closing if not task.done()}

    async def _sweep_retention(self) -> None:
        """Settled segments age out of retention with no new ack to notice it."""
        while True:
            await asyncio.sleep(RETENTION_SWEEP_S)
            for shell in list(self._queues.values()):
                shell.reclaim_settled()

    def _queue_expired(self, shell: QueueShell) -> None:
        vhost, name = shell.settings.vhost, shell.name
        if self.queue(vhost, name) is shell:
            logger.info("queue %r in vhost %r expired (x-expires)", name, vhost)
            self.apply_soon(DeleteQueue(vhost, name))

    def _queue_unused(self, shell: QueueShell) -> None:
        """RabbitMQ deletes an auto-delete queue when its last consumer goes."""
        vhost, name = shell.settings.vhost, shell.name
        record = self.state.queue(vhost, name)
        if record is not None and record.auto_delete:
            self.apply_soon(DeleteQueue(vhost, name))

    def _refresh_queue_settings(self, vhost: str, name: str) -> None:
        shell = self._queues.get((vhost, name))
        if shell is None:
            return
        settings = self.queue_settings(vhost, name)
        shell.settings = settings
        shell.core.set_limits(settings.limits)
        if shell.replication is not None:
            definition = self.state.queue_policy_definition(vhost, name)
            shell.replication.leader.sync_mode = _sync_mode(definition)
            shell.replication.sync_batch_size = int(definition.get("ha-sync-batch-size", 4096))
        shell.schedule_pump()

    def _remove_orphan_queue_directories(self) -> None:
        root = os.path.join(self.config.data_dir, "queues")
        if not os.path.isdir(root):
            return
        live = {os.path.basename(self.queue_directory(v.name, q.name))
                for v in self.state.vhosts() for q in self.state.queues(v.name)}
        for entry in os.listdir(root):
            if entry not in live:
                shutil.rmtree(os.path.join(root, entry), ignore_errors=True)


async def _close_and_remove(shell: QueueShell) -> None:
    await shell.close()
    shutil.rmtree(shell.directory, ignore_errors=True)


def _sync_mode(definition: Mapping[str, Any]) -> str:
    """ha-sync-mode: RabbitMQ's default under an ha-mode policy is manual; queues
    replicated by `x-queue-replicas` copy everything, as quorum queues do."""
    default = "manual" if "ha-mode" in definition else "automatic"
    return str(definition.get("ha-sync-mode", default))

