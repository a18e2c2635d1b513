"""`ClusterNode`: one broker node wired into the cluster.

Theory of operation. The node owns a `ClusterTransport` (one authenticated
TCP link per node pair), a `ClusterRpc` multiplexing Raft messages, requests
and notices over it, a `RaftDriver` whose state machine is the
`ReplicatedMetadata`, and the `Broker`, whose definition changes are proposed
through Raft and whose queue shells follow the committed metadata
(`Broker.react` on every applied command, `Broker.reconcile` after a snapshot).

The Raft leader is the controller. What it decides (node liveness, failover
elections, replica moves, the bootstrap of an empty metadata) and every
node's heartbeat to it are the pure `Controller` core (controller.py), run by
a `ControllerDriver` over asyncio ports (controller_ports.py): this node only
feeds it heartbeats heard, links lost and restored, leadership taken, and a
beat every `heartbeat_ms`. Metadata proposals are `ReplicatedMetadata`'s
(its `MetadataProposals` core). Two more rules are pure objects this node
asks on every beat: `Isolation` (the queues led here stop taking writes while
the Raft leader is silent for the session timeout) and `ReadIndex` (whether
the applied metadata is current, from the leader's commit index), which a
`ReadIndexDriver` (read_index_driver.py) runs over this node's ports.

Leader lease (`LeaderLease`, leader_lease.py): the replicated queues led here
deliver only while this node has heard the Raft leader (or, as the Raft
leader, a majority of the voters) within `lease_ms`, well below the time the
controller takes to declare the node down; a lapsed lease comes back only
after a read-index round trip (or a fresh quorum) started after the lapse.
The pure `LeaseKeeper` (lease_keeper.py) decides all of it from the Raft
messages stepped here, the reads at delivery and on the beat, and the answers
to the read-index questions it asks; a `LeaseDriver` (lease_driver.py) carries
its verdicts out over ports this node gives it (the read index asked in a
task, a timer on the clock, the pumps of the replicated queues).

Membership (`ClusterMembership`): joining and removing nodes are Raft
single-server configuration changes run by the leader; other nodes forward
the request to it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
from collections.abc import Callable, Mapping
from typing import Any

from logbroker.broker import Broker
from logbroker.broker_config import BrokerConfig
from logbroker.cluster.asyncio_ports import LoopTimers, TaskSet
from logbroker.cluster.cluster_membership import ClusterMembership
from logbroker.cluster.cluster_rpc import INTERNAL_ERROR, ClusterRpc
from logbroker.cluster.cluster_settings import ClusterSettings
from logbroker.cluster.controller import Controller, ControllerConfig
from logbroker.cluster.controller_driver import ControllerDriver
from logbroker.cluster.controller_ports import (
    AsyncioControllerPorts,
    RaftMetadataView,
    RpcHeartbeats,
    RpcStatusAsker,
    TaskHandovers,
    TaskProposer,
)
from logbroker.cluster.envelope import Envelope
from logbroker.cluster.forwarding_port import ForwardingPort
from logbroker.cluster.isolation import Isolation
from logbroker.cluster.lease_driver import LeaseDriver, LeasePorts
from logbroker.cluster.lease_keeper import LeaseKeeper, LeaseRaft
from logbroker.cluster.liveness import NodeAddress
from logbroker.cluster.queue_failover import QueueFailover
from logbroker.cluster.queue_followers import QueueFollowers
from logbroker.cluster.queue_handover import HandoverPorts, QueueHandover
from logbroker.cluster.queue_host import HostPorts, QueueHost
from logbroker.cluster.read_index import RaftPosition, ReadIndex
from logbroker.cluster.read_index_driver import ReadIndexDriver, ReadIndexPorts
from logbroker.cluster.remote_queue import RemoteQueueRegistry
from logbroker.cluster.replica_feed import ReplicaFeed
from logbroker.cluster.replicated_metadata import ReplicatedMetadata
from logbroker.errors import PRECONDITION_FAILED, BrokerError
from logbroker.metadata import Applied
from logbroker.metadata.events import (
    ClusterNodeAdded,
    ClusterNodeRemoved,
    ClusterNodeUpdated,
    NodeLivenessChanged,
    QueuePlacementChanged,
)
from logbroker.queue_figures import figures_answer
from logbroker.queue_placement import NodeView, PlacementError, locator_strategy, place_queue
from replication.raft.driver import RaftDriver
from replication.raft.membership import EMPTY_MEMBERSHIP, desired_roles
from replication.raft.messages import Message
from replication.raft.ready import Role, SoftState
from replication.raft.wire import WireDecodeError, decode_message, encode_message
from replication.transport import ClusterTransport, FrameTooLargeError, PeerAddress
from segments.clock import SYSTEM_CLOCK, Clock
from segments.filesystem import FileSystem, RealFileSystem

logger = logging.getLogger(__name__)
_PEER_EVENTS = (ClusterNodeAdded, ClusterNodeUpdated, ClusterNodeRemoved)
READ_INDEX_TIMEOUT_S = 2.0  # the question on a restart or a new term, asked again if lost


class ClusterNode:
    def __init__(self, settings: ClusterSettings, config: BrokerConfig,
                 fs: FileSystem | None = None, rng: random.Random | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        self.clock = clock
        self.config = config
        self.fs = fs or RealFileSystem()
        self.rng = rng or random.Random()
        self.rpc = ClusterRpc(self._send_frame, self._on_raft)
        self.metadata = ReplicatedMetadata(settings.node_name, self.rpc,
                                           settings.proposal_timeout_s, clock)
        self.transport = ClusterTransport(
            settings.node_name, settings.secret, host=settings.bind_host,
            port=settings.cluster_port, on_frame=self.rpc.on_frame,
            on_peer_change=self._peer_changed, rng=self.rng, tls=settings.link_tls)
        self._driver: RaftDriver | None = None
        self._broker: Broker | None = None
        self.tasks = TaskSet()
        self.membership = ClusterMembership(
            settings.node_name, self.rpc, self.metadata, lambda: self.driver,
            self.transport.connected_peers, self.address, settings.proposal_timeout_s, clock)
        self.remote_queues = RemoteQueueRegistry(ForwardingPort(
            settings.node_name, self.rpc, lambda: self.metadata.state,
            self.transport.is_connected, lambda: self.driver.applied_index,
            settings.proposal_timeout_s, clock))
        self.started_ms = clock.wall_ms()  # the failover rule prefers the longest running node
        self.queue_host = QueueHost(HostPorts(
            settings.node_name, self.rpc, lambda: self.broker, lambda: self.metadata.state,
            self._wait_applied, self.started_ms,
            lambda header: figures_answer(self.broker, header)))
        self.followers = QueueFollowers(
            settings.node_name, self.rpc, lambda v, n: self.metadata.state.queue(v, n),
            self.fs, lambda v, n: self.broker.queue_directory(v, n))
        self.feed = ReplicaFeed(
            settings.node_name, self.rpc, lambda: self.broker, self.metadata.propose,
            self.followers.copy_status, lambda: self.started_ms)
        self.handover = QueueHandover(HandoverPorts(
            settings.node_name, self.rpc, lambda: self.broker, lambda: self.metadata.state,
            self.metadata.propose, self.transport.connected_peers, lambda: self.failover,
            clock))
        self._timers = LoopTimers(clock)
        self.controller = self._build_controller()
        # Monotonic: a process that was stopped must see the silence it slept through.
        self.isolation = Isolation(settings.session_timeout_ms, clock.monotonic_ms())
        # Raft's read index: this node's metadata is current once it has applied as much
        # as the leader said it committed.
        self.read_index = ReadIndexDriver(ReadIndex(), ReadIndexPorts(
            self._raft_position, self._ask_commit, self._metadata_confirmed))
        self.lease = self._build_lease()
        self.rpc.on_notice("cluster.heartbeat", self._heard)
        self.rpc.handle("metadata.read_index", self._read_index)

    def _build_controller(self) -> ControllerDriver:
        settings = self.settings
        core = Controller(ControllerConfig(
            settings.node_name, settings.session_timeout_ms, settings.link_grace_ms,
            bootstrap=lambda: self.broker.bootstrap_commands()))
        ports = AsyncioControllerPorts(
            RaftMetadataView(self.metadata), TaskProposer(self.metadata.propose, self.tasks),
            RpcStatusAsker(settings.node_name, self.rpc.call,
                           lambda vhost, name: self.feed.replica_status(vhost, name),
                           self.tasks),
            TaskHandovers(self.handover.sync, self.handover.transfer, self.tasks),
            RpcHeartbeats(self.rpc), self._timers)
        return ControllerDriver(core, ports, self.clock)

    @property
    def node_name(self) -> str:
        return self.settings.node_name

    @property
    def failover(self) -> QueueFailover:
        """The controller's elections (their counts are in the cluster's status)."""
        return self.controller.core.failover

    @property
    def driver(self) -> RaftDriver:
        assert self._driver is not None, "start() first"
        return self._driver

    @property
    def broker(self) -> Broker:
        assert self._broker is not None, "start() first"
        return self._broker

    # ------------------------------------------------------------- lifecycle

    async def start(self) -> Broker:
        settings = self.settings
        self.fs.makedirs(self.config.data_dir)
        founding = EMPTY_MEMBERSHIP if settings.join else desired_roles(
            sorted({settings.node_name, *(peer.name for peer in settings.peers)}))
        broker = Broker(self.config, self.fs, self.metadata, proposer=self.metadata.propose,
                        clock=self.clock)
        broker.remote = self.remote_queues
        broker.placer = self._place
        broker.may_deliver = self._may_deliver
        broker.lease_holds = self.lease.holds
        broker.use_replicas(self.followers, self.read_index.current)
        self._broker = broker
        self.metadata.on_applied = self._applied
        self.metadata.on_restored = self._restored
        self._driver = RaftDriver.open(
            self.fs, os.path.join(self.config.data_dir, "raft"), settings.node_name,
            founding, self.metadata, self._send_raft, rng=self.rng,
            tick_interval_s=settings.raft_tick_s)
        self.metadata.driver = self._driver
        self._driver.on_role_change = self._role_changed
        broker.reconcile()
        await self.transport.start()
        self._update_peers()
        self._driver.start()
        broker.start_background()
        self.feed.start()
        self._timers.call_at(self.clock.monotonic_ms(), self._pulse)  # the first beat
        if settings.join:
            self._spawn(self.membership.join_through(settings.others()))
        logger.info("cluster node %s: cluster port %d, founding members %s", settings.node_name,
                    self.transport.port, founding or "(joining)")
        return broker

    async def stop(self) -> None:
        if self._broker is not None and self._driver is not None:
            try:  # a controlled shutdown: hand every led queue to a follower first
                await self.handover.hand_over_all()
            except Exception as error:  # stopping goes on regardless
                logger.warning("shutdown handover incomplete: %s", error)
        self.controller.stop()
        self._timers.cancel_all()  # the controller's, the beat, a lapsed lease's reading
        await self.tasks.cancel_all()
        await self.feed.stop()
        await self.rpc.close()
        if self._broker is not None:
            if self._broker.roles is not None:
                await self._broker.roles.settle()
            await self.followers.stop_all()
            await self._broker.close()
        await self.metadata.stop()
        if self._driver is not None:
            await self._driver.stop()
        await self.transport.stop()

    def _spawn(self, work: Any) -> None:
        self.tasks.spawn(work)

    # ------------------------------------------------------------ the wire

    def _send_frame(self, peer: str, payload: bytes) -> bool:
        try:
            return self.transport.send(peer, payload)
        except FrameTooLargeError:
            # A Raft snapshot past the frame limit: dropped like a lost message, and
            # said loudly, since that follower cannot catch up until it is smaller.
            logger.error("a %d-byte cluster frame to %s exceeds the frame limit; dropped",
                         len(payload), peer)
            return False

    def _send_raft(self, message: Message) -> None:
        self.rpc.send_raft(message.target, encode_message(message))

    def _on_raft(self, peer: str, data: bytes) -> None:
        try:
            message = decode_message(data)
        except WireDecodeError as error:
            logger.warning("dropped a malformed Raft message from %s: %s", peer, error)
            return
        if self._driver is not None:
            if message.source == self._driver.leader_id:
                self.isolation.heard(self.clock.monotonic_ms())
            self._driver.step(message)
            self.lease.heard(message.source, message.term)

    def _peer_changed(self, peer: str, connected: bool) -> None:
        if connected:
            self.controller.link_restored(peer)
            return
        self.controller.link_lost(peer)
        self.rpc.peer_down(peer)
        self.remote_queues.peer_down(peer)
        self.queue_host.peer_down(peer)

    def _update_peers(self) -> None:
        # An address given in --peers wins over the one the node advertises: the
        # operator knows the route (a proxy, a NAT) between these two nodes.
        configured = {peer.name: peer for peer in self.settings.others()}
        peers = dict(configured)
        for record in self.metadata.state.cluster_nodes():
            if record.name != self.node_name and record.name not in configured:
                peers[record.name] = PeerAddress(record.name, record.host, record.cluster_port)
        self.transport.set_peers(peers.values())

    # ------------------------------------------------------ applied commands

    def _follower_down(self, node: str) -> None:
        for shell in self.broker.all_queues():
            gate = shell.replication
            if gate is not None and node in gate.leader.members:
                gate.leader.follower_down(node)

    async def _wait_applied(self, index: int) -> None:
        """Return once this node applied the metadata log up to `index`."""
        driver = self.driver
        if driver.applied_index < index:
            await driver.wait_applied(index, self.settings.proposal_timeout_s)

    def _raft_position(self) -> RaftPosition | None:
        driver = self._driver
        if driver is None:
            return None
        return RaftPosition(driver.leader_id, driver.is_leader, driver.committed_own_term,
                            driver.commit_index,
                            max(driver.applied_index, self.metadata.applying_index))

    async def _read_index(self, peer: str, envelope: Envelope) -> Envelope:
        driver = self.driver
        if not (driver.is_leader and driver.committed_own_term):
            raise BrokerError(INTERNAL_ERROR, f"node {self.node_name} cannot answer a "
                              "read index: not a leader with its term committed")
        return Envelope("ok", {"commit": driver.commit_index})

    def _ask_commit(self, leader: str, on_answer: Callable[[int | None], None]) -> None:
        """The read index's question: `leader`'s commit index (None: no answer)."""
        async def asking() -> None:
            on_answer(await self._commit_of(leader, READ_INDEX_TIMEOUT_S))
        self._spawn(asking())

    async def _commit_of(self, leader: str, timeout_s: float) -> int | None:
        try:
            answer = await self.rpc.call(leader, Envelope("metadata.read_index"), timeout_s)
            return int(answer.header["commit"])
        except Exception as error:  # no answer: asked again (the beat, the lease's retry)
            logger.debug("no read index from %s: %s", leader, error)
            return None

    def _metadata_confirmed(self) -> None:
        if self.broker.roles is not None:
            self.broker.roles.catch_up()

    def _applied(self, applied: Applied) -> None:
        self.broker.react(applied)
        for event in applied.events:
            if isinstance(event, NodeLivenessChanged) and not event.node.up:
                self._follower_down(event.node.name)
            elif isinstance(event, QueuePlacementChanged):
                old, record = event.previous_leader, event.queue
                if old not in (None, self.node_name, record.leader_node):
                    # The old leader may be paused with its link still up: consumers
                    # and publishes forwarded to it move now, not when the link breaks.
                    self.remote_queues.leader_moved(record.vhost, record.name, old)
        if self.broker.roles is not None:
            self.broker.roles.catch_up()
        if any(isinstance(event, _PEER_EVENTS) for event in applied.events):
            self._update_peers()

    def _restored(self) -> None:
        self.broker.reconcile()
        self._update_peers()

    # ----------------------------------------------------------- placement

    def _place(self, vhost: str, name: str, arguments: Mapping[str, Any], exclusive: bool
               ) -> tuple[str, tuple[str, ...]]:
        state = self.metadata.state
        definition = state.queue_policy_definition(vhost, name)
        connected = self.transport.connected_peers()
        nodes = [NodeView(record.name, record.name == self.node_name
                          or (record.up and record.name in connected))
                 for record in state.cluster_nodes()]
        if not any(view.name == self.node_name for view in nodes):
            nodes.append(NodeView(self.node_name, True))
        try:
            strategy = locator_strategy(arguments, definition, self.settings.default_locator)
            placement = place_queue(
                strategy=strategy, local_node=self.node_name, nodes=nodes,
                leader_counts=state.queue_leader_counts(),
                member_counts=state.queue_member_counts(), arguments=arguments,
                policy_definition=definition, rng=self.rng, exclusive=exclusive)
        except PlacementError as error:
            raise BrokerError(PRECONDITION_FAILED, str(error)) from None
        return placement.leader, placement.members

    # ---------------------------------------------------------- controller

    def address(self) -> NodeAddress:
        settings = self.settings
        return NodeAddress(settings.node_name, settings.advertised_host, self.transport.port,
                           settings.amqp_port, settings.http_port)

    def _role_changed(self, soft: SoftState) -> None:
        self.isolation.heard(self.clock.monotonic_ms())  # a new term: from now
        self.lease.term_changed()
        self.read_index.leader_changed()  # ask the new leader, at once
        if soft.role is not Role.LEADER:
            return
        logger.info("cluster node %s is now the Raft leader (the controller)", self.node_name)
        connected = self.transport.connected_peers()
        self.controller.took_over(frozenset(
            n for n in self.driver.membership.nodes if n not in connected))

    def _check_isolation(self) -> None:
        """Refuse publishes and acks on the replicated queues led here while the
        controller has not been heard for the session timeout (it may have moved
        them); carry on when it is heard again."""
        gates = [(shell.name, shell.replication) for shell in self.broker.all_queues()
                 if shell.replication is not None]
        changes = self.isolation.check(gates, self.clock.monotonic_ms(), self.driver.is_leader)
        for name, isolated in changes:
            if isolated:
                logger.warning("queue %r: no word from the controller for %d ms; refusing "
                               "publishes and acks until it is heard again", name,
                               self.settings.session_timeout_ms)

    # ---------------------------------------------------------- leader lease

    def _build_lease(self) -> LeaseDriver:
        settings = self.settings
        keeper = LeaseKeeper(settings.node_name, settings.lease_ms, self.clock.monotonic_ms(),
                             retry_ms=max(1, int(settings.raft_tick_s * 1000)))
        return LeaseDriver(keeper, LeasePorts(
            self._lease_raft, self._prove_lease, self._timers.call_at, self._lease_restored),
            self.clock)

    def _lease_raft(self) -> LeaseRaft | None:
        driver = self._driver
        if driver is None:
            return None
        return LeaseRaft(driver.leader_id, driver.is_leader, driver.term,
                         driver.membership.voters)

    def _may_deliver(self, vhost: str, name: str, epoch: int) -> bool:
        """Whether this node's leader of `name` at `epoch` may deliver now: the metadata
        still names it, and the lease holds (the clock is read now, at delivery)."""
        record = self.metadata.state.queue(vhost, name)
        if record is None or record.leader_node != self.node_name or record.epoch != epoch:
            return False
        return self.lease.holds()

    def _prove_lease(self, leader: str, on_done: Callable[[bool], None]) -> None:
        self._spawn(self._read_index_applied(leader, on_done))

    async def _read_index_applied(self, leader: str, on_done: Callable[[bool], None]) -> None:
        """The lease's proof: `leader`'s read index, applied here."""
        commit = await self._commit_of(leader, self.settings.lease_ms / 1000)
        if commit is None:
            on_done(False)
            return
        try:
            await self.driver.wait_applied(commit, self.settings.proposal_timeout_s)
        except Exception as error:  # not applied in time: the keeper asks again
            logger.debug("leader lease proof from %s not applied: %s", leader, error)
            on_done(False)
            return
        on_done(True)

    def _lease_restored(self) -> None:
        for shell in self.broker.all_queues():
            if shell.capabilities().replicated:
                shell.schedule_pump()  # what waited for the lease

    def _heard(self, peer: str, envelope: Envelope) -> None:
        header = envelope.header
        self.controller.heard(NodeAddress(
            peer, str(header["host"]), int(header["cluster_port"]), int(header["amqp_port"]),
            int(header["http_port"])))

    def _pulse(self) -> None:
        """The node's beat, every `heartbeat_ms` of the clock until the node stops."""
        with contextlib.suppress(Exception):  # the next beat tries again
            self._beat()
        self._timers.call_at(self.clock.monotonic_ms() + self.settings.heartbeat_ms,
                             self._pulse)

    def _beat(self) -> None:
        address = self.address()
        self._check_isolation()
        self.lease.holds()  # notices a lapse even with nothing to deliver
        self.read_index.ask()
        if self.broker.roles is not None:
            self.broker.roles.catch_up()
        self.controller.beat(address)
