"""Deterministic simulation of a Raft cluster: nodes, network, clock and disks from one seed.

Each node is a `RaftNode` with its `RaftStorage` on its own `MemoryFileSystem`;
the shell loop is the one `ready.py` prescribes (persist, send, apply,
advance). One `random.Random(seed)` draws the scenario (`SimParams`) and then
every event, so a seed replays exactly:

- the network loses, duplicates and delays messages (random delays reorder
  them), and partitions links, sometimes in one direction only;
- nodes crash at tick boundaries or in the middle of saving a Ready (entries
  written, not yet synced): the file system then keeps a random prefix of the
  unsynced writes, possibly torn. Messages of that Ready are never sent;
- clients propose commands to whichever node leads; nodes compact their logs
  into snapshots; leaders hand over to another voter; a controller walks the
  membership through adding a node (learner first, then voter) and removing a
  founder.

After `chaos_ticks` every fault heals; the run must then elect a leader and
commit fresh proposals on every member within a bounded number of ticks
(liveness). `SafetyChecker` watches every step (see checkers.py).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from replication.raft import (
    EMPTY_MEMBERSHIP,
    ChangeKind,
    ConfigChangeError,
    Entry,
    EntryKind,
    Membership,
    NotLeader,
    ProposalRefused,
    RaftNode,
    RaftStorage,
    Ready,
    Role,
    Snapshot,
    desired_roles,
    next_change,
)
from segments.log import LogConfig
from segments.memory_filesystem import MemoryFileSystem
from tests.sim.checkers import (
    InvariantViolation,
    SafetyChecker,
    check_log_matching,
    decode_commands,
    encode_commands,
)
from tests.sim.network import RaftNetwork
from tests.sim.scenario import SimParams, SimResult

DATA_DIR = "/raft"
# Small segments, so compaction really deletes segment files and recovery crosses them.
LOG_CONFIG = LogConfig(segment_bytes_max=2048, index_interval_bytes=256)
LOG_CHECK_EVERY = 25
FINAL_PROPOSALS = 5


class LivenessFailure(AssertionError):
    pass


@dataclass
class SimNode:
    id: str
    founder: bool
    fs: MemoryFileSystem = field(default_factory=MemoryFileSystem)
    storage: RaftStorage | None = None
    raft: RaftNode | None = None
    commands: list[bytes] = field(default_factory=list)
    applied_index: int = 0
    restart_at: int = 0

    @property
    def alive(self) -> bool:
        return self.raft is not None


class Simulation:
    def __init__(self, seed: int, params: SimParams | None = None) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.params = params or SimParams.draw(self.rng)
        p = self.params
        self.network = RaftNetwork(self.rng, p.loss, p.duplicate, p.max_delay)
        self.stats = self.network.stats
        self.checker = SafetyChecker()
        self.now = 0
        self.trace: list[str] = []
        founders = [f"n{i}" for i in range(1, p.founders + 1)]
        self.founding = Membership.of(founders)
        self.nodes = {node_id: SimNode(node_id, True) for node_id in founders}
        self.plan: list[Membership] = []
        if p.membership_change:
            self._plan_membership(founders)
        self.checker.founded(Entry(1, 1, EntryKind.CONFIG, self.founding.encode()))
        self.partition_until: int | None = None
        self.healed = False
        self.counter = 0
        for node in self.nodes.values():
            self._start(node)

    def _plan_membership(self, founders: list[str]) -> None:
        joiner = f"n{len(founders) + 1}"
        self.nodes[joiner] = SimNode(joiner, False)
        grown = desired_roles([*founders, joiner], self.founding)
        leaving = self.rng.choice(founders)
        self.plan = [grown, desired_roles([n for n in [*founders, joiner] if n != leaving], grown)]

    def log(self, text: str) -> None:
        self.trace.append(f"[{self.now:4}] {text}")

    # ------------------------------------------------------------- node life

    def _start(self, node: SimNode) -> None:
        storage = RaftStorage.open(node.fs, DATA_DIR, LOG_CONFIG)
        restored = storage.load()
        peers = self.founding if node.founder else EMPTY_MEMBERSHIP
        node.storage = storage
        node.raft = RaftNode(node.id, peers, self.params.config,
                             random.Random(self.rng.random()), restored)
        snapshot = restored.snapshot if restored is not None else None
        node.commands, node.applied_index = [], 0
        if snapshot is not None:
            self._install(node, snapshot)

    def _crash(self, node: SimNode, why: str) -> None:
        node.fs.crash(self.rng)
        node.raft = node.storage = None
        node.restart_at = self.now + self.rng.randint(5, 60)
        self.stats["crashes"] += 1
        self.log(f"{node.id} crashes ({why}); back at {node.restart_at}")

    def _install(self, node: SimNode, snapshot: Snapshot) -> None:
        self.checker.on_snapshot(node.id, snapshot)
        node.commands = decode_commands(snapshot.data)
        node.applied_index = snapshot.index

    # ------------------------------------------------------------ the shell

    def _handle_ready(self, node: SimNode) -> None:
        raft, storage = node.raft, node.storage
        if raft is None or storage is None or not raft.has_ready():
            return
        ready = raft.ready()
        if (ready.must_sync and not self.healed
                and self.rng.random() < self.params.mid_save_crash_rate):
            storage.write(ready)
            self._crash(node, "while saving")
            return
        storage.save(ready)
        for message in ready.messages:
            self.checker.on_sent(message)
            self.network.send(message, self.now)
        if ready.snapshot is not None:
            self._install(node, ready.snapshot)
            self.stats["snapshots_installed"] += 1
            self.log(f"{node.id} installs snapshot {ready.snapshot.index}")
        self._apply(node, ready)
        raft.advance(ready)
        if ready.soft_state is not None and ready.soft_state.role is Role.LEADER:
            self.stats["elections"] += 1
            self.log(f"{node.id} leads term {raft.term} ({raft.membership})")

    def _apply(self, node: SimNode, ready: Ready) -> None:
        for entry in ready.committed_entries:
            self.checker.on_apply(node.id, node.applied_index, entry)
            node.applied_index = entry.index
            if entry.kind is EntryKind.NORMAL:
                node.commands.append(entry.data)

    def _observe(self, node: SimNode) -> None:
        if node.raft is not None:
            self.checker.observe(node.raft)

    def _live(self) -> list[SimNode]:
        return [node for node in self.nodes.values() if node.alive]

    def _tick(self) -> None:
        self.now += 1
        for node in self._live():
            assert node.raft is not None
            node.raft.tick()
            self._observe(node)
        for node in self._live():
            self._handle_ready(node)
        for message in self.network.due(self.now):
            target = self.nodes[message.target]
            if target.raft is not None:
                target.raft.step(message)
                self._observe(target)
        for node in self._live():
            self._handle_ready(node)
        if self.now % LOG_CHECK_EVERY == 0:
            check_log_matching({n.id: n.raft for n in self._live() if n.raft is not None})

    # ----------------------------------------------------------- the chaos

    def _chaos(self) -> None:
        p = self.params
        for node in self.nodes.values():
            if node.alive and self.rng.random() < p.crash_rate:
                self._crash(node, "power cut")
            elif not node.alive and self.now >= node.restart_at:
                self._start(node)
                self.log(f"{node.id} restarts")
        if self.partition_until is None and self.rng.random() < p.partition_rate:
            self._partition()
        elif self.partition_until is not None and self.now >= self.partition_until:
            self._heal_partition()
        if self.rng.random() < p.propose_rate:
            self._propose()
        if self.rng.random() < p.compact_rate:
            self._compact(self.rng.choice(sorted(self.nodes)))
        if self.rng.random() < p.transfer_rate:
            self._transfer()
        if self.plan and self.now % 5 == 0:
            self._change_membership()

    def _partition(self) -> None:
        cut = self.network.partition(self.rng, sorted(self.nodes))
        self.partition_until = self.now + self.rng.randint(10, 80)
        self.stats["partitions"] += 1
        self.log(cut)

    def _heal_partition(self) -> None:
        if self.network.blocked:
            self.log("partition heals")
        self.network.blocked.clear()
        self.partition_until = None

    def _leaders(self) -> list[SimNode]:
        return [n for n in self._live() if n.raft is not None and n.raft.role is Role.LEADER]

    def _propose(self) -> int | None:
        leaders = self._leaders()
        if not leaders:
            return None
        node = self.rng.choice(leaders)
        assert node.raft is not None
        self.counter += 1
        command = f"c{self.counter}".encode()
        try:
            index = node.raft.propose(command)
        except (NotLeader, ProposalRefused):
            return None
        self.stats["proposals"] += 1
        self._observe(node)
        return index

    def _compact(self, node_id: str) -> None:
        node = self.nodes[node_id]
        if node.raft is None or node.storage is None:
            return
        log = node.raft.raft_log
        if log.applied_index - log.snapshot_index < 5:
            return
        snapshot = node.raft.compact(log.applied_index, encode_commands(node.commands))
        self.checker.on_snapshot(node.id, snapshot)
        node.storage.save_snapshot(snapshot)
        self.stats["compactions"] += 1

    def _transfer(self) -> None:
        leaders = self._leaders()
        if not leaders:
            return
        raft = leaders[-1].raft
        assert raft is not None
        target = self.rng.choice(sorted(raft.membership.voters))
        raft.transfer_leadership(target)
        self.stats["transfers"] += 1
        self.log(f"{raft.id} hands leadership to {target}")

    def _change_membership(self) -> None:
        leaders = self._leaders()
        if not leaders:
            return
        raft = leaders[-1].raft
        assert raft is not None
        change = next_change(raft.membership, self.plan[0])
        if change is None:
            self.plan.pop(0)
            return
        if change.kind is ChangeKind.ADD_VOTER:
            match = raft.match_index(change.node_id)
            if match is None or match < raft.commit_index:
                return  # promote a learner only once it has caught up
        try:
            raft.propose_config_change(change)
        except (ProposalRefused, ConfigChangeError):
            return
        self.stats["config_changes"] += 1
        self.log(f"{raft.id} proposes {change}")

    # ----------------------------------------------------------- the phases

    def run(self) -> SimResult:
        for _ in range(self.params.chaos_ticks):
            self._chaos()
            self._tick()
        self._heal()
        leader = self._await_leader()
        self._await_commits(leader)
        self._check_converged()
        return self._result()

    def _heal(self) -> None:
        self.healed = True
        self.network.loss = self.network.duplicate = 0.0
        self._heal_partition()
        for node in self.nodes.values():
            if not node.alive:
                self._start(node)
                self.log(f"{node.id} restarts")
        self.log("all faults healed")

    def _members(self, raft: RaftNode) -> list[SimNode]:
        return [self.nodes[node_id] for node_id in sorted(raft.membership.nodes)]

    def _await_leader(self) -> SimNode:
        """A leader that every member follows, for two election timeouts in a row.

        Holding that long means it passed a check-quorum round on evidence from
        after the heal, and that no handover begun before it is still under way.
        """
        deadline = self.now + self.params.elect_within
        hold = 2 * self.params.config.election_ticks
        candidate: tuple[str, int] | None = None
        since = self.now
        while self.now < deadline:
            self._tick()
            leader = self._acknowledged_leader()
            current = (leader.id, leader.raft.term) if leader and leader.raft else None
            if current != candidate:
                candidate, since = current, self.now
            elif leader is not None and self.now - since >= hold:
                return leader
        raise LivenessFailure(f"no leader acknowledged by all members {self.params.elect_within} "
                              "ticks after healing")

    def _acknowledged_leader(self) -> SimNode | None:
        for leader in self._leaders():
            assert leader.raft is not None
            members = self._members(leader.raft)
            if leader.raft.transfer_target is None and all(
                m.raft is not None and m.raft.leader_id == leader.id for m in members
            ):
                return leader
        return None

    def _await_commits(self, leader: SimNode) -> None:
        assert leader.raft is not None
        wanted: dict[int, bytes] = {}
        for _ in range(FINAL_PROPOSALS):
            self.counter += 1
            command = f"c{self.counter}".encode()
            try:
                wanted[leader.raft.propose(command)] = command
            except (NotLeader, ProposalRefused) as error:
                raise LivenessFailure(f"leadership lost without faults: {error}") from error
            self._tick()
        deadline = self.now + self.params.commit_within
        last = max(wanted)
        while self.now < deadline:
            if all(m.applied_index >= last for m in self._members(leader.raft)):
                break
            self._tick()
        else:
            states = {m.id: m.applied_index for m in self._members(leader.raft)}
            raise LivenessFailure(f"proposals up to {last} not applied everywhere within "
                                  f"{self.params.commit_within} ticks: applied {states}")
        for index, command in wanted.items():
            if self.checker.committed.get(index, (0, EntryKind.NOOP, b""))[2] != command:
                raise LivenessFailure(f"proposal {command!r} at {index} was not committed")

    def _check_converged(self) -> None:
        check_log_matching({n.id: n.raft for n in self._live() if n.raft is not None})
        leader = self._leaders()[0]
        assert leader.raft is not None
        members = self._members(leader.raft)
        longest = max(members, key=lambda member: member.applied_index)
        for member in members:
            if longest.commands[: len(member.commands)] != member.commands:
                raise InvariantViolation(
                    f"{member.id} holds commands that differ from {longest.id}'s"
                )

    def _result(self) -> SimResult:
        final = {}
        for node in self.nodes.values():
            raft = node.raft
            if raft is None:
                final[node.id] = "down"
                continue
            log = raft.raft_log
            final[node.id] = (
                f"{raft.role.value} term={raft.term} log=({log.snapshot_index},"
                f"{log.last_index}] commit={log.commit_index} applied={node.applied_index} "
                f"commands={len(node.commands)} {raft.membership}"
            )
        return SimResult(self.seed, self.params, self.now, self.stats, self.trace, final)


def run_seed(seed: int) -> SimResult:
    """Run one seed; raises InvariantViolation or LivenessFailure with the trace attached."""
    simulation = Simulation(seed)
    try:
        return simulation.run()
    except AssertionError as failure:
        tail = "\n".join(simulation.trace[-40:])
        raise type(failure)(
            f"seed {seed} failed: {failure}\n"
            f"replay: python -m tests.sim --seed {seed}\n"
            f"last events:\n{tail}"
        ) from failure
