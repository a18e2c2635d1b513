"""`QueueNode`: one broker node of the queue simulation.

A node is a Raft member (`RaftNode` + `RaftStorage` on its own
`MemoryFileSystem`, the shell loop of ready.py) whose state machine is the
real `MetadataState`: committed entries are decoded `Command`s, applied in
order, refusals ignored (the same on every node), as `ReplicatedMetadata`
does (`ClusterNode._applied` runs inside the state machine's `apply`: the
driver's applied index moves after it, and `applying_index` names the entry
being applied). On the same file system it keeps each replicated queue as a
`LeaderReplica` or a follower replica, moved between the two by the shipped
`RoleMovesDriver` and its `RoleMoves` core over the simulated ports of
roles_ports.py, as `ReplicaRoles` runs them: a queue's record changed,
`sync`; after every applied command and on every beat, `catch_up` (moves
wait while the metadata is not current, `metadata_current`).
`QueueInSyncChanged` goes to the gate of the same epoch while the metadata
is current; otherwise the queue's move waits, and hands the record's in-sync
set over once it is (`Broker._in_sync_changed`).

Replication is the shipped code: the followers are the `FollowerFetchDriver`
and its `FollowerFetch` cores, and the leader side (fetches answered, long
polls parked, the leaders' in-sync changes proposed) is the
`LeaderFeedDriver` and its `LeaderFeed` core, both over the simulated ports
of queue_ports.py (the network, the tick clock, the node's timers, a disk
whose syncs land later, the shells as the queues led here, the Raft
proposals); a crash throws the drivers, their timers and whatever was not
synced away.


Proposals go through the shipped `ProposalDriver` and `MetadataProposals`
core (`ReplicatedMetadata.propose`) over simulated ports (sim_ports.py).
Every node sends
heartbeats to the Raft leader, and runs the shipped controller
(logbroker/cluster/controller.py, its `ControllerDriver`) over the
simulation's ports, as `ClusterNode` does: heartbeats heard, links lost and
restored, leadership taken, a beat. A node that has not heard from the Raft
leader for the session timeout isolates the gates of the queues it leads
(the shipped `Isolation`, as `ClusterNode._check_isolation`): no publishes, acks
held; hearing it again, `gate.rejoin` applies the held acks.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from logbroker.cluster.controller import Controller, ControllerConfig
from logbroker.cluster.controller_driver import ControllerDriver
from logbroker.cluster.isolation import Isolation
from logbroker.cluster.metadata_proposals import MetadataProposals
from logbroker.cluster.proposal_driver import ProposalDriver
from logbroker.cluster.read_index import RaftPosition, ReadIndex
from logbroker.cluster.read_index_driver import ReadIndexDriver, ReadIndexPorts
from logbroker.metadata import (
    Command,
    MetadataError,
    MetadataState,
    QueueDeclared,
    QueueInSyncChanged,
    QueuePlacementChanged,
    bootstrap_commands,
    encode_command,
    hash_password,
)
from logbroker.metadata.events import Event
from logbroker.role_moves import RoleMoves
from logbroker.role_moves_driver import RoleMovesDriver
from replication.queue.failover import ReplicaStatus
from replication.queue.fetch_protocol import FetchAnswer
from replication.queue.follower_fetch import FetchTiming
from replication.queue.follower_fetch_driver import FollowerFetchDriver, Key, LeaderAt
from replication.queue.follower_replica import FollowerReplica
from replication.queue.leader_feed_driver import FeedTiming, LeaderFeedDriver
from replication.queue.replication_leader import ReplicationLimits
from replication.raft import (
    EntryKind,
    Membership,
    RaftConfig,
    RaftNode,
    RaftStorage,
    Ready,
    Role,
)
from replication.raft.messages import Message
from segments.memory_filesystem import MemoryFileSystem
from tests.sim.cluster_sim import LOG_CONFIG as RAFT_LOG_CONFIG
from tests.sim.queue_leader import LeaderHooks, LeaderReplica
from tests.sim.queue_messages import (
    ClusterMessage,
    Fetch,
    FetchReply,
    ForwardedPublish,
    Heartbeat,
    Propose,
    ProposeAnswer,
    ReadIndexAnswer,
    ReadIndexRequest,
    StatusAnswer,
    StatusRequest,
)
from tests.sim.queue_ports import (
    SimClock,
    SimDisk,
    SimFeedQueues,
    SimFetchTransport,
    SimInSyncProposer,
    SimParking,
    SimTimers,
)
from tests.sim.roles_ports import SimRolePorts
from tests.sim.sim_ports import (
    SimControllerPorts,
    SimProposalPorts,
    SimRaftProposer,
    address_of,
    answer_message,
    decode_command,
)

VHOST = "/"
STATUS_TIMEOUT = 8  # ticks: the status answers an election waits for
LINK_CHECK_SLACK = 1  # ticks: the check after a broken link's grace
PROPOSE_TIMEOUT = 30  # ticks: a proposal's answer, at the latest
PROPOSE_RETRY = 1  # ticks: a proposal that found no leader tries again
READ_INDEX_TIMEOUT = 15  # ticks: a read index question unanswered by then is asked again
PASSWORD_HASH = hash_password("guest", b"salt")
# In ticks. A backlog here is tens of messages: a follower more than 20 behind rests
# between fetches (at most 3 ticks), so the seeds run the catch-up pacing too.
FOLLOWER_TIMING = FetchTiming(fetch_timeout_ms=15, backoff_min_ms=1, backoff_max_ms=8,
                              catch_up_lag=20, catch_up_rest_max_ms=3)
# Small answers, so catching up takes several fetches; a long poll of 5 ticks.
FEED_TIMING = FeedTiming(wait_ms=5, bytes_max=600, in_sync_every_ms=2)


class NodeWorld(LeaderHooks, Protocol):
    now: int
    rng: random.Random
    stats: Counter[str]

    def send(self, message: ClusterMessage) -> None: ...

    def connected(self, node: str) -> set[str]: ...

    def request_id(self) -> int: ...

    def log(self, text: str) -> None: ...

    def later(self, delay: int, action: Callable[[], None]) -> None: ...


@dataclass(frozen=True)
class NodeConfig:
    raft: RaftConfig
    founding: Membership
    session_timeout: int
    link_grace: int
    heartbeat_every: int
    limits: ReplicationLimits
    max_sync_delay: int


class QueueNode:
    def __init__(self, node_id: str, world: NodeWorld, config: NodeConfig) -> None:
        self.id = node_id
        self.world = world
        self.config = config
        self.fs = MemoryFileSystem()
        self.raft: RaftNode | None = None
        self.storage: RaftStorage | None = None
        self.state = MetadataState()
        self.started_at = 0
        self.restart_at = 0
        self.controller = self._controller()
        self.leaders: dict[str, LeaderReplica] = {}
        self._new_drivers()
        self.proposals = self._proposals()
        self.applied_index = 0  # the Raft driver's (its Applier's)
        self.applying_index = 0  # ReplicatedMetadata's: the entry being applied
        self.roles = self._roles()
        self.read_index = self._read_index_driver()
        self._next_beat = 0
        self.isolation = Isolation(config.session_timeout, 0)

    @property
    def alive(self) -> bool:
        return self.raft is not None

    @property
    def now(self) -> int:
        return self.world.now

    @property
    def stats(self) -> Counter[str]:
        return self.world.stats

    @property
    def hooks(self) -> LeaderHooks:
        return self.world

    @property
    def rng(self) -> random.Random:
        return self.world.rng

    @property
    def limits(self) -> ReplicationLimits:
        return self.config.limits

    @property
    def max_sync_delay(self) -> int:
        return self.config.max_sync_delay

    def log(self, text: str) -> None:
        self.world.log(text)

    def request_id(self) -> int:
        return self.world.request_id()

    def members(self) -> frozenset[str]:
        assert self.raft is not None
        return self.raft.membership.nodes

    # ------------------------------------------------------------- node life

    def _controller(self) -> ControllerDriver:
        """The shipped controller core and driver, over this node's simulated ports."""
        config = self.config
        core = Controller(ControllerConfig(
            self.id, config.session_timeout, config.link_grace, STATUS_TIMEOUT,
            LINK_CHECK_SLACK, lambda: bootstrap_commands(PASSWORD_HASH)))
        self._ports = SimControllerPorts(self)
        return ControllerDriver(core, self._ports, SimClock(self.world),
                                lambda level, text: self.log(f"{self.id} controller: {text}"))

    def _proposals(self) -> ProposalDriver:
        """The shipped proposals core and driver, over this node's simulated ports."""
        self._raft_proposer = SimRaftProposer(self)
        self._proposal_ports = SimProposalPorts(self, self._raft_proposer)
        return ProposalDriver(MetadataProposals(PROPOSE_TIMEOUT, PROPOSE_RETRY),
                              self._proposal_ports, SimClock(self.world))

    def _roles(self) -> RoleMovesDriver:
        """The shipped roles core and driver, over this node's simulated ports."""
        return RoleMovesDriver(RoleMoves(self.id), SimRolePorts(self), SimClock(self.world),
                               lambda level, text: self.log(f"{self.id} roles: {text}"),
                               self.world.stats)

    @property
    def elections(self) -> int:
        return self.controller.core.failover.elections

    def start(self) -> None:
        self.storage = RaftStorage.open(self.fs, "/raft", RAFT_LOG_CONFIG)
        restored = self.storage.load()
        self.raft = RaftNode(self.id, self.config.founding, self.config.raft,
                             random.Random(self.world.rng.random()), restored)
        self.state = MetadataState()  # rebuilt from the log (no compaction here)
        self.applied_index = self.applying_index = 0
        self.roles = self._roles()
        self.read_index = self._read_index_driver()
        self.started_at = self.now
        self.controller = self._controller()
        self._next_beat = self.now + self.world.rng.randint(0, self.config.heartbeat_every)
        self.isolation = Isolation(self.config.session_timeout, self.now)
        self.feed.start()

    def crash(self, restart_at: int) -> None:
        self.fs.crash(self.world.rng)
        for shell in self.leaders.values():
            shell.crash()
        self.leaders.clear()
        self._new_drivers()
        self.proposals.stop()
        self.proposals = self._proposals()
        self.controller.stop()
        self.roles.stop()  # a proposal answered after the crash reaches no move
        self.raft = self.storage = None
        self.restart_at = restart_at

    # ------------------------------------------------------------ Raft shell

    def handle_ready(self) -> None:
        raft, storage = self.raft, self.storage
        if raft is None or storage is None or not raft.has_ready():
            return
        ready = raft.ready()
        storage.save(ready)
        for message in ready.messages:
            self.world.send(message)
        self._apply(ready)
        raft.advance(ready)
        if ready.soft_state is not None:
            self.isolation.heard(self.now)  # a new term: count the silence from now
            self.read_index.leader_changed()  # ask the new leader, at once
            if ready.soft_state.role is Role.LEADER:
                self.log(f"{self.id} leads Raft term {raft.term}")
                connected = self.world.connected(self.id)
                self.controller.took_over(frozenset(
                    n for n in raft.membership.nodes if n not in connected))
            else:
                self._raft_proposer.leadership_lost()

    def _apply(self, ready: Ready) -> None:
        """The driver's `Applier.apply` for each entry: the state machine's `apply`
        (`ReplicatedMetadata.apply`, and in it `ClusterNode._applied`), then the applied
        index moves."""
        for entry in ready.committed_entries:
            ok, reason = False, "dropped"
            if entry.kind is EntryKind.NORMAL:
                ok, reason = True, ""
                self.applying_index = entry.index
                try:
                    events: tuple[Event, ...] = self.state.apply(
                        decode_command(entry.data)).events
                except MetadataError as refused:  # refused alike on every node
                    ok, reason = False, refused.text
                else:
                    self._react(events)
                    self.roles.catch_up()
            self.applied_index = entry.index
            self._raft_proposer.applied(entry, ok, reason)
            self._proposal_ports.applied_through(entry.index)

    def _react(self, events: tuple[Event, ...]) -> None:
        """Broker.react: role moves, in-sync sets to the gates."""
        for event in events:
            if isinstance(event, QueueInSyncChanged):
                shell = self.leaders.get(event.queue.name)
                if shell is None or shell.gate.leader.epoch != event.queue.epoch:
                    continue
                if self.roles.current:
                    shell.moved(partial(shell.gate.leader.in_sync_committed,
                                        event.queue.in_sync))
                else:
                    self.world.stats["in_sync_ignored"] += 1
                    self.log(f"{self.id} ignores in sync {list(event.queue.in_sync)} for "
                             f"{event.queue.name}: metadata not current (applied "
                             f"{self.applying_index}, commit {self._commit_index()})")
                    self.roles.sync((VHOST, event.queue.name))
            elif isinstance(event, QueueDeclared | QueuePlacementChanged):
                self.roles.sync((VHOST, event.queue.name))

    def _commit_index(self) -> int:
        return self.raft.commit_index if self.raft is not None else 0

    def metadata_current(self) -> bool:
        """ClusterNode._metadata_current: the shipped `ReadIndex` decides."""
        return self.read_index.current()

    def _raft_position(self) -> RaftPosition | None:
        raft = self.raft
        if raft is None:
            return None
        return RaftPosition(raft.leader_id, raft.role is Role.LEADER, raft.committed_own_term,
                            raft.commit_index, max(self.applied_index, self.applying_index))

    def _read_index_driver(self) -> ReadIndexDriver:
        """The shipped `ReadIndexDriver` and `ReadIndex` core, over the simulated network."""
        self._read_index_waiting: dict[int, Callable[[int | None], None]] = {}
        return ReadIndexDriver(ReadIndex(), ReadIndexPorts(
            self._raft_position, self._ask_read_index, lambda: self.roles.catch_up()))

    def _ask_read_index(self, leader: str, answer: Callable[[int | None], None]) -> None:
        """The driver's port: `metadata.read_index` to the leader; a question the network
        lost counts as unanswered after `READ_INDEX_TIMEOUT` (answered once either way)."""
        request = self.request_id()
        self._read_index_waiting[request] = answer
        self.world.send(ReadIndexRequest(self.id, leader, request))
        waiting = self._read_index_waiting

        def unanswered() -> None:
            late = waiting.pop(request, None)
            if late is not None:
                late(None)
        self.world.later(READ_INDEX_TIMEOUT, unanswered)

    def _read_index_answered(self, answer: ReadIndexAnswer) -> None:
        waiting = self._read_index_waiting.pop(answer.request, None)
        if waiting is not None:
            waiting(answer.commit)

    def _read_index(self, request: ReadIndexRequest) -> None:
        """ClusterNode._read_index: only a leader whose term is committed answers."""
        raft = self.raft
        assert raft is not None
        commit = (raft.commit_index if raft.role is Role.LEADER and raft.committed_own_term
                  else None)
        self.world.send(ReadIndexAnswer(self.id, request.source, request.request, commit))

    # ----------------------------------------------------------- replication

    def _new_drivers(self) -> None:
        """The shipped drivers over this node's simulated ports (new ones: a crash
        loses the old timers, answers, parked fetches and syncs under way)."""
        self.timers = SimTimers()
        clock = SimClock(self.world)
        self.fetches = SimFetchTransport(self.id, self.world)
        self.disk = SimDisk(self.fs, self.timers, self.world, self.config.max_sync_delay)
        self.followers = FollowerFetchDriver(self.id, self.fetches, self._leader_at, self.disk,
                                             self.timers, clock, FOLLOWER_TIMING)
        self.parking = SimParking(self.leaders)
        self.feed = LeaderFeedDriver(self.id, SimFeedQueues(self.leaders, self.parking),
                                     SimInSyncProposer(self), self.timers, clock, FEED_TIMING,
                                     self.world.stats)

    def _reply(self, fetch: Fetch, answer: FetchAnswer) -> None:
        self.world.send(FetchReply(self.id, fetch.source, fetch.request, answer))

    def _leader_at(self, key: Key) -> LeaderAt | None:
        record = self.state.queue(*key)
        return LeaderAt(record.leader_node, record.epoch) if record is not None else None

    def following(self) -> set[Key]:
        return self.followers.following()

    def follow(self, queue: str) -> None:
        self.followers.follow((VHOST, queue))

    def stop_following(self, queue: str) -> int | None:
        """QueueFollowers.stop: let a sync under way finish, close, give the hw known
        (None: none heard since the replica was opened)."""
        replica = self.followers.stop((VHOST, queue))
        if replica is None:
            return None
        self.disk.settle(replica)
        replica.close()
        return replica.high_watermark

    def follower_replica(self, queue: str) -> FollowerReplica | None:
        return self.followers.replica((VHOST, queue))

    # ----------------------------------------------------------------- roles

    def replica_status(self, queue: str) -> ReplicaStatus | None:
        """ReplicaFeed.replica_status."""
        shell = self.leaders.get(queue)
        if shell is not None and not shell.closed:
            return ReplicaStatus(self.id, shell.log.next_offset,
                                 shell.gate.history.latest_epoch, self.started_at)
        replica = self.follower_replica(queue)
        if replica is None or replica.closed:
            return None
        return ReplicaStatus(self.id, replica.next_offset, replica.last_epoch, self.started_at)

    # ------------------------------------------------------------- proposals

    def propose(self, command: Command, done: Callable[[bool], None] | None = None) -> None:
        """ReplicatedMetadata.propose: checked here first, then the shipped driver."""
        try:
            self.state.check(command)
        except MetadataError:
            if done is not None:
                done(False)
            return
        self.proposals.propose(encode_command(command),
                               lambda error: done(error is None) if done is not None else None)

    def send(self, message: ClusterMessage) -> None:
        self.world.send(message)

    # -------------------------------------------------------------- messages

    def receive(self, message: ClusterMessage) -> None:
        raft = self.raft
        assert raft is not None
        if isinstance(message, Message):
            if message.source == raft.leader_id:
                self.isolation.heard(self.now)
            raft.step(message)
        elif isinstance(message, Heartbeat):
            self.controller.heard(address_of(message.source))
        elif isinstance(message, Fetch):
            self.feed.fetch(message.source, (VHOST, message.queue), message.fetch,
                            partial(self._reply, message))
        elif isinstance(message, FetchReply):
            self.fetches.answered(message)
        elif isinstance(message, StatusRequest):
            self.world.send(StatusAnswer(self.id, message.source, message.request,
                                         self.replica_status(message.queue)))
        elif isinstance(message, StatusAnswer):
            self._ports.status.answered(message.request, message.status)
        elif isinstance(message, Propose):
            source, request = message.source, message.request
            self._raft_proposer.serve(message.data, lambda outcome: self.world.send(
                answer_message(self.id, source, request, outcome)))
        elif isinstance(message, ProposeAnswer):
            self._proposal_ports.answered(message)
        elif isinstance(message, ReadIndexRequest):
            self._read_index(message)
        elif isinstance(message, ReadIndexAnswer):
            self._read_index_answered(message)
        elif isinstance(message, ForwardedPublish):
            self.publish_here(message.queue, message.publish, message.payload)

    def publish_here(self, queue: str, publish: int, payload: bytes) -> None:
        shell = self.leaders.get(queue)
        if shell is None or shell.closed:
            self.world.confirm(queue, publish, False)  # not the leader (any more)
        else:
            shell.publish(publish, payload)

    def client_publish(self, queue: str, publish: int, payload: bytes) -> None:
        """A client's publish reaches this node: handled here or forwarded to the leader."""
        record = self.state.queue(VHOST, queue)
        if record is None or record.leader_node is None:
            self.world.confirm(queue, publish, False)
        elif record.leader_node == self.id:
            self.publish_here(queue, publish, payload)
        else:
            self.world.send(ForwardedPublish(self.id, record.leader_node, queue, publish,
                                             payload))

    # ------------------------------------------------------------ periodic

    def work(self) -> None:
        raft = self.raft
        assert raft is not None
        if self.now >= self._next_beat:
            self._next_beat = self.now + self.config.heartbeat_every
            self._check_isolation()
            self.read_index.ask()
            self.roles.catch_up()
            self.controller.beat(address_of(self.id))
        self.timers.run_due(self.now)
        self.parking.wake_parked(self.now)

    def _check_isolation(self) -> None:
        """ClusterNode._check_isolation: no publishes on the queues led here, acks held,
        while the controller is silent for the session timeout."""
        assert self.raft is not None
        gates = [(queue, shell.gate) for queue, shell in self.leaders.items()]
        for queue, isolated in self.isolation.check(gates, self.now,
                                                    self.raft.role is Role.LEADER):
            self.log(f"{self.id} {'isolates' if isolated else 'rejoins with'} its {queue} "
                     "shell")

    def link_lost(self, peer: str) -> None:
        """The transport lost its link to `peer` (ClusterNode._peer_changed)."""
        self.controller.link_lost(peer)

    def link_restored(self, peer: str) -> None:
        self.controller.link_restored(peer)

