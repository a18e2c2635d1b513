"""Deterministic simulation of a 3-node cluster serving replicated queues.

Everything comes from one seed: the scenario (`QueueSimParams`), every
fault and every client action, so a seed replays exactly
(`python -m tests.sim --scenario queues --seed N`). Three `QueueNode`s
(queue_node.py) run Raft for the metadata (the real `MetadataState`), the
controller (liveness, failover through `choose_leader`), and per queue a
`LeaderReplica` or a follower replica run by the shipped `FollowerFetchDriver`
(replication/queue/follower_fetch_driver.py) over simulated ports. They
share one simulated network (network.py: loss, duplication, delays hence
reordering, one-way and two-way partitions) that
carries Raft, heartbeats, proposals, replication and forwarded publishes
alike; a crashed node's links break at once (the controller's link grace).
Clients (queue_clients.py) publish with confirms and consume with acks
through any live node; one publisher per queue speaks AMQP 0-9-1 bytes to
the shipped `AmqpConnection` machine on its node (amqp_traffic.py).

Phases:
1. safety (`chaos_ticks`): faults on; nodes crash at tick boundaries, their
   `MemoryFileSystem` keeping a random prefix of the unsynced writes (leaders
   and followers sync a random number of ticks after writing), and restart;
   consumers sometimes close their channels;
2. heal and converge: every fault stops, every node runs; within
   `converge_within` ticks each queue must have a live leader of the
   recorded epoch with every member in sync, confirming publishes again;
3. drain: publishers stop; within `drain_within` ticks every follower must
   hold all of the log, the high watermark reach its end, and consumers empty
   every queue.

Checks: the `Ledger` (queue_checkers.py) all along; at the end lost = 0,
unexpected = 0, and the replicas' logs identical below the high watermark.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable

from logbroker.metadata import DeclareQueue, QueueRecord
from replication.queue.replication_leader import ReplicationLimits
from replication.raft import Membership, Role
from tests.sim.amqp_traffic import AmqpTraffic
from tests.sim.cluster_sim import LivenessFailure
from tests.sim.network import Network
from tests.sim.queue_checkers import Ledger, check_replicas
from tests.sim.queue_clients import ConsumerClient, Publisher
from tests.sim.queue_leader import LeaderReplica
from tests.sim.queue_messages import ClusterMessage, ForwardedPublish, Propose
from tests.sim.queue_node import VHOST, NodeConfig, QueueNode
from tests.sim.queue_scenario import QueueSimParams, QueueSimResult

NODES = ("n1", "n2", "n3")
CLIENT_MAX_DELAY = 2


class QueueSimulation:
    def __init__(self, seed: int, params: QueueSimParams | None = None,
                 queues: int | None = None, check_redelivered: bool = True) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.params = params or QueueSimParams.draw(self.rng, queues=queues)
        p = self.params
        self.network: Network[ClusterMessage] = Network(self.rng, p.loss, p.duplicate,
                                                        p.max_delay)
        self.stats = self.network.stats
        self.now = 0
        self.trace: list[str] = []
        self._requests = 0
        self._later: list[tuple[int, int, Callable[[], None]]] = []
        self._later_seq = 0
        config = NodeConfig(p.raft, Membership.of(NODES), p.session_timeout, p.link_grace,
                            p.heartbeat_every, ReplicationLimits(lag_max_ms=p.lag_max),
                            p.max_sync_delay)
        self.nodes = {name: QueueNode(name, self, config) for name in NODES}
        names = [f"q{i}" for i in range(p.queues)]
        self.placements = {}
        for name in names:
            members = list(NODES)
            self.rng.shuffle(members)
            self.placements[name] = tuple(members)
        self.ledgers = {name: Ledger(name, check_redelivered) for name in names}
        self.publishers = {name: Publisher(name, self.ledgers[name]) for name in names}
        self.consumers = [ConsumerClient(f"{name}-c{i}", name, self.ledgers[name], p.prefetch,
                                         p.ack_delay)
                          for name in names for i in range(p.consumers)]
        self.amqp = AmqpTraffic(self, self.nodes, self.publishers)
        self.partition_until: int | None = None
        self.publishing = True
        self.faults = True
        for node in self.nodes.values():
            node.start()

    # ------------------------------------------------------- the world API

    @property
    def now_ms(self) -> int:
        return self.now

    def log(self, text: str) -> None:
        self.trace.append(f"[{self.now:4}] {text}")

    def send(self, message: ClusterMessage) -> None:
        # Requests that are not idempotent travel on TCP in the real cluster: never twice.
        self.network.send(message, self.now,
                          not isinstance(message, ForwardedPublish | Propose))

    def connected(self, node: str) -> set[str]:
        """The peers `node` has a live link to: every other running node."""
        return {peer.id for peer in self._live() if peer.id != node}

    def request_id(self) -> int:
        self._requests += 1
        return self._requests

    def later(self, delay: int, action: Callable[[], None]) -> None:
        self._later_seq += 1
        heapq.heappush(self._later, (self.now + delay, self._later_seq, action))

    def client_delay(self) -> int:
        return self.rng.randint(0, CLIENT_MAX_DELAY)

    def confirm(self, queue: str, publish: int, ok: bool) -> None:
        if self.amqp.confirm(queue, publish, ok):
            return
        publisher = self.publishers[queue]
        self.later(self.client_delay(), lambda: publisher.confirmed(publish, ok))

    def committed(self, queue: str, node: str, offset: int, payload: bytes) -> None:
        self.ledgers[queue].on_committed(node, offset, payload)

    def _entry_node(self) -> QueueNode | None:
        live = self._live()
        return self.rng.choice(live) if live else None

    def publish_via(self, queue: str, publish: int, payload: bytes) -> bool:
        node = self._entry_node()
        if node is None:
            return False
        node.client_publish(queue, publish, payload)
        return True

    def leader_shell(self, queue: str) -> LeaderReplica | None:
        node = self._entry_node()
        record = node.state.queue(VHOST, queue) if node is not None else None
        if record is None or record.leader_node is None:
            return None
        leader = self.nodes[record.leader_node]
        return leader.leaders.get(queue) if leader.alive else None

    # --------------------------------------------------------------- ticks

    def _live(self) -> list[QueueNode]:
        return [node for node in self.nodes.values() if node.alive]

    def _tick(self) -> None:
        self.now += 1
        if self.faults:
            self._chaos()
        live = self._live()
        for node in live:
            assert node.raft is not None
            node.raft.tick()
            node.handle_ready()
        for message in self.network.due(self.now):
            target = self.nodes[message.target]
            if target.alive:
                target.receive(message)
        for node in live:
            node.handle_ready()
            node.work()
            node.handle_ready()
        while self._later and self._later[0][0] <= self.now:
            heapq.heappop(self._later)[2]()
        if self.now % 10 == 0:
            self._declare_queues()
        close_rate = self.params.close_rate if self.faults else 0.0
        self.amqp.tick(close_rate)
        if self.publishing:
            for publisher in self.publishers.values():
                if self.rng.random() < self.params.publish_rate and \
                        not self.amqp.publish(publisher.queue):
                    publisher.publish(self)
        for consumer in self.consumers:
            consumer.tick(self, close_rate)
        flush_rate = self.params.flush_rate if self.faults else 1.0
        for node in live:
            for shell in list(node.leaders.values()):
                if self.rng.random() < flush_rate:
                    shell.flush()

    def _declare_queues(self) -> None:
        """The admin declares each queue (through any node) until it exists."""
        node = self._entry_node()
        if node is None:
            return
        for name, members in self.placements.items():
            if node.state.queue(VHOST, name) is None:
                # The replica count keeps the shipped controller's replica mover from
                # shrinking the set to the default of one.
                node.propose(DeclareQueue(VHOST, name, durable=True, leader_node=members[0],
                                          members=members,
                                          arguments={"x-queue-replicas": len(members)}))

    # ------------------------------------------------------------- chaos

    def _chaos(self) -> None:
        p = self.params
        for node in self.nodes.values():
            if node.alive and self.rng.random() < p.crash_rate:
                restart_at = self.now + self.rng.randint(5, 60)
                self._crash(node, restart_at)
            elif not node.alive and self.now >= node.restart_at:
                self._restart(node)
        if self.partition_until is None and self.rng.random() < p.partition_rate:
            self._partition()
        elif self.partition_until is not None and self.now >= self.partition_until:
            self._heal_partition()

    def _crash(self, node: QueueNode, restart_at: int) -> None:
        node.crash(restart_at)
        self.amqp.node_crashed(node.id)
        self.stats["crashes"] += 1
        self.log(f"{node.id} crashes; back at {restart_at}")
        for peer in self._live():
            peer.link_lost(node.id)  # the process died: its sockets closed

    def _restart(self, node: QueueNode) -> None:
        node.start()
        self.log(f"{node.id} restarts")
        for peer in self._live():
            if peer is not node:
                peer.link_restored(node.id)

    def _partition(self) -> None:
        cut = self.network.partition(self.rng, list(NODES))
        self.partition_until = self.now + self.rng.randint(10, 80)
        self.stats["partitions"] += 1
        self.amqp.partitioned()
        self.log(cut)

    def _heal_partition(self) -> None:
        if self.network.blocked:
            self.log("partition heals")
        self.network.blocked.clear()
        self.amqp.healed()
        self.partition_until = None

    # ------------------------------------------------------------ phases

    def run(self) -> QueueSimResult:
        for _ in range(self.params.chaos_ticks):
            self._tick()
        self._heal()
        confirmed = {name: len(ledger.confirmed) for name, ledger in self.ledgers.items()}
        self._await("converge", self.params.converge_within,
                    lambda: self._converged(confirmed))
        self.publishing = False
        for consumer in self.consumers:
            consumer.ack_delay = 1  # drain at pace
        self._await("drain", self.params.drain_within, self._drained)
        self._check_final()
        return self._result()

    def _heal(self) -> None:
        self.faults = False
        self.network.loss = self.network.duplicate = 0.0
        self._heal_partition()
        for node in self.nodes.values():
            if not node.alive:
                self._restart(node)
        self.log("all faults healed")

    def _await(self, phase: str, within: int, done: Callable[[], str | None]) -> None:
        deadline = self.now + within
        while True:
            why = done()
            if why is None:
                self.log(f"{phase}: done")
                return
            if self.now >= deadline:
                raise LivenessFailure(f"did not {phase} within {within} ticks after the heal: "
                                      f"{why}")
            self._tick()

    def _record(self, queue: str) -> QueueRecord | None:
        for node in self._live():
            if node.raft is not None and node.raft.role is Role.LEADER:
                return node.state.queue(VHOST, queue)
        return None

    def _converged(self, confirmed_before: dict[str, int]) -> str | None:
        """Each queue led at its epoch by a live node with every member in sync, and
        confirming publishes again."""
        for name, ledger in self.ledgers.items():
            why = self._settled(name)
            if why is not None:
                return why
            if len(ledger.confirmed) <= confirmed_before[name]:
                return f"{name}: no publish confirmed since the heal"
        return None

    def _settled(self, name: str, caught_up: bool = False) -> str | None:
        """The queue led at its epoch by a live node, every member in sync (and with
        `caught_up`, holding all of it)."""
        record = self._record(name)
        if record is None or record.leader_node is None:
            return f"{name}: no Raft leader, or the queue is not declared"
        shell = self.nodes[record.leader_node].leaders.get(name)
        if shell is None or shell.epoch != record.epoch or shell.fenced is not None:
            return f"{name}: {record.leader_node} does not lead epoch {record.epoch}"
        if set(record.in_sync) != set(record.members) or \
                set(shell.gate.leader.in_sync) != set(record.members):
            return (f"{name}: in sync {list(record.in_sync)} (leader's view "
                    f"{list(shell.gate.leader.in_sync)}) of {list(record.members)}")
        if not caught_up:
            return None
        end = shell.log.next_offset
        if shell.gate.high_watermark != end:
            return f"{name}: high watermark {shell.gate.high_watermark} below {end}"
        for member in record.members:
            follower = self.nodes[member].follower_replica(name)
            if member != record.leader_node and (
                    follower is None or follower.next_offset != end):
                return f"{name}: {member} has not caught up to {end}"
        return None

    def _drained(self) -> str | None:
        if self._later or any(not consumer.idle for consumer in self.consumers):
            return "client traffic in flight"
        for name in self.ledgers:
            why = self._settled(name, caught_up=True)
            if why is not None:
                return why
            record = self._record(name)
            assert record is not None and record.leader_node is not None
            shell = self.nodes[record.leader_node].leaders[name]
            if shell.core.message_count or shell.core.unacked_count or shell.held:
                return (f"{name}: {shell.core.message_count} ready, "
                        f"{shell.core.unacked_count} unacked on {record.leader_node}")
            for member in record.members:
                follower = self.nodes[member].follower_replica(name)
                if follower is not None and \
                        follower.acked_version != shell.gate.acked_version:
                    return f"{name}: {member} has not taken the latest acks"
        return None

    # ------------------------------------------------------------- checks

    def _check_final(self) -> None:
        for name, ledger in self.ledgers.items():
            ledger.check_final()
            record = self._record(name)
            assert record is not None and record.leader_node is not None
            replicas = {member: self.nodes[member].follower_replica(name)
                        for member in record.members}
            followers = {member: replica.log for member, replica in replicas.items()
                         if replica is not None}
            check_replicas(ledger, record.leader_node,
                           self.nodes[record.leader_node].leaders[name], followers)

    def _result(self) -> QueueSimResult:
        final = {}
        for node in self.nodes.values():
            raft = node.raft
            assert raft is not None
            roles = ", ".join(
                [f"{q} leader e{s.epoch} end={s.log.next_offset} hw={s.gate.high_watermark}"
                 for q, s in sorted(node.leaders.items())]
                + [f"{q} follower end={f.next_offset} start={f.log_start}"
                   for (_, q), f in sorted(node.followers.replicas().items())])
            final[node.id] = f"{raft.role.value} term={raft.term}; {roles}"
            self.stats.update(node.followers.stats)
        for node in self.nodes.values():
            self.stats["elections"] += node.elections
        queues = {name: ledger.summary() for name, ledger in self.ledgers.items()}
        for name in self.ledgers:
            record = self._record(name)
            if record is not None:
                queues[name]["epoch"] = record.epoch
        return QueueSimResult(self.seed, self.params, self.now, self.stats, queues,
                              self.trace, final)


def run_queue_seed(seed: int, queues: int | None = None,
                   check_redelivered: bool = True) -> QueueSimResult:
    """Run one seed; raises InvariantViolation or LivenessFailure with the trace attached."""
    simulation = QueueSimulation(seed, queues=queues, check_redelivered=check_redelivered)
    try:
        return simulation.run()
    except AssertionError as failure:
        tail = "\n".join(simulation.trace[-40:])
        flag = f" --queues {queues}" if queues is not None else ""
        raise type(failure)(
            f"seed {seed} failed: {failure}\n"
            f"replay: python -m tests.sim --scenario queues --seed {seed}{flag}\n"
            f"last events:\n{tail}"
        ) from failure
