"""A hand-driven Raft cluster for scripted scenario tests.

Messages wait in one FIFO queue until the test delivers them; `deliver()`
runs until the cluster is quiet and returns the trace of what was delivered
(`describe` lines), so a test can assert the exact exchange. Links can be cut
per direction, and nodes crashed and restarted: `persisted` is a faithful
model of what a node's storage holds (a node persists each Ready before its
messages leave, as the real shell does).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from replication.raft import (
    EMPTY_MEMBERSHIP,
    Entry,
    EntryKind,
    HardState,
    Membership,
    PersistedState,
    RaftConfig,
    RaftNode,
    Ready,
    Role,
    Snapshot,
)
from replication.raft.messages import Message, describe

CONFIG = RaftConfig(election_ticks=10, heartbeat_ticks=1)


@dataclass
class Disk:
    hard_state: HardState = field(default_factory=HardState)
    snapshot: Snapshot | None = None
    entries: list[Entry] = field(default_factory=list)

    def save(self, ready: Ready) -> None:
        if ready.snapshot is not None:
            self.snapshot = ready.snapshot
            self.entries = []
        if ready.entries:
            first = ready.entries[0].index
            self.entries = [e for e in self.entries if e.index < first] + list(ready.entries)
        if ready.hard_state is not None:
            self.hard_state = ready.hard_state

    def compact(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.entries = [e for e in self.entries if e.index > snapshot.index]

    def state(self) -> PersistedState | None:
        if self.hard_state == HardState() and self.snapshot is None and not self.entries:
            return None
        return PersistedState(self.hard_state, self.snapshot, tuple(self.entries))


class Cluster:
    def __init__(
        self,
        voters: Iterable[str],
        learners: Iterable[str] = (),
        joiners: Iterable[str] = (),
        config: RaftConfig = CONFIG,
        seed: int = 0,
    ) -> None:
        self.config = config
        self.founding = Membership.of(voters, learners)
        self.rng = random.Random(seed)
        self.nodes: dict[str, RaftNode | None] = {}
        self.disks: dict[str, Disk] = {}
        self.applied: dict[str, list[Entry]] = {}
        self.queue: list[Message] = []
        self.cut: set[tuple[str, str]] = set()
        self.dropped: list[str] = []
        for node_id in sorted(self.founding.nodes):
            self._boot(node_id, self.founding)
        for node_id in joiners:
            self._boot(node_id, EMPTY_MEMBERSHIP)

    def _boot(self, node_id: str, peers: Membership) -> None:
        self.disks[node_id] = Disk()
        self.applied[node_id] = []
        self.nodes[node_id] = RaftNode(node_id, peers, self.config,
                                       random.Random(self.rng.random()))

    def node(self, node_id: str) -> RaftNode:
        node = self.nodes[node_id]
        assert node is not None, f"{node_id} is down"
        return node

    def live(self) -> list[str]:
        return [node_id for node_id, node in self.nodes.items() if node is not None]

    # --------------------------------------------------------------- driving

    def flush(self) -> None:
        """Carry out every pending Ready: persist, queue messages, apply, advance."""
        for node_id in self.live():
            node = self.node(node_id)
            while node.has_ready():
                ready = node.ready()
                self.disks[node_id].save(ready)
                self.queue.extend(ready.messages)
                if ready.snapshot is not None:
                    self.applied[node_id] = [Entry(ready.snapshot.term, ready.snapshot.index,
                                                   EntryKind.NOOP, b"snapshot")]
                self.applied[node_id].extend(ready.committed_entries)
                node.advance(ready)

    def deliver(
        self, keep: Callable[[Message], bool] | None = None, max_messages: int = 10_000
    ) -> list[str]:
        """Deliver until quiet; the trace of delivered messages. `keep` may drop some."""
        trace: list[str] = []
        self.flush()
        while self.queue and len(trace) < max_messages:
            message = self.queue.pop(0)
            target = self.nodes.get(message.target)
            if (message.source, message.target) in self.cut or target is None or (
                keep is not None and not keep(message)
            ):
                self.dropped.append(describe(message))
                continue
            trace.append(describe(message))
            target.step(message)
            self.flush()
        return trace

    def tick(self, node_ids: Iterable[str] | None = None, times: int = 1) -> None:
        for _ in range(times):
            for node_id in node_ids if node_ids is not None else self.live():
                self.node(node_id).tick()
        self.flush()

    def run(self, ticks: int) -> list[str]:
        """Tick every live node and deliver everything, `ticks` times; the trace."""
        trace: list[str] = []
        for _ in range(ticks):
            self.tick()
            trace += self.deliver()
        return trace

    def elect(self, node_id: str) -> list[str]:
        self.node(node_id).campaign()
        trace = self.deliver()
        assert self.node(node_id).role is Role.LEADER, trace
        return trace

    def propose(self, node_id: str, *commands: bytes) -> list[int]:
        indexes = [self.node(node_id).propose(command) for command in commands]
        self.flush()
        return indexes

    # ---------------------------------------------------------------- faults

    def isolate(self, node_id: str) -> None:
        for other in self.nodes:
            if other != node_id:
                self.cut |= {(node_id, other), (other, node_id)}

    def heal(self) -> None:
        self.cut.clear()

    def crash(self, node_id: str) -> None:
        self.nodes[node_id] = None
        self.queue = [m for m in self.queue if m.source != node_id]

    def restart(self, node_id: str) -> None:
        peers = self.founding if node_id in self.founding.nodes else EMPTY_MEMBERSHIP
        disk = self.disks[node_id]
        self.applied[node_id] = []
        self.nodes[node_id] = RaftNode(node_id, peers, self.config,
                                       random.Random(self.rng.random()), disk.state())

    # ----------------------------------------------------------------- views

    def leaders(self) -> list[str]:
        return [n for n in self.live() if self.node(n).role is Role.LEADER]

    def commands(self, node_id: str) -> list[bytes]:
        return [e.data for e in self.applied[node_id] if e.kind is EntryKind.NORMAL]

    def log_terms(self, node_id: str) -> list[tuple[int, int]]:
        log = self.node(node_id).raft_log
        return [(i, log.entry(i).term) for i in range(log.first_index, log.last_index + 1)]
