"""A hand-driven replicated queue for scripted protocol tests.

Every node has its own MemoryFileSystem (so a crash loses only its own unsynced
writes) and one queue directory holding the same files whatever its role: the
segment log, the cursor log and the epoch history. The leader side is what the
real shell will be: a `Log` appended through `Log.append`, a `CursorLog` of
acks, an `EpochHistory` that gets `begin(epoch, log.next_offset)` when the node
becomes leader, and a `ReplicationLeader`. A follower is a `FollowerReplica`.

`fetch` runs one round of the protocol for a follower: fetch (its epoch, next
offset, last epoch and oldest offset), verdict, and for `Stream` the leader's
raw batches from that offset plus its epoch entries, then sync, then the
leader's whole acked range set. Nothing is queued between the
two sides: a follower that does not fetch costs the leader nothing. A fetch can
cut the follower's power a given number of file operations into its work.
"""

from __future__ import annotations

import dataclasses
import os
import random
from dataclasses import dataclass, field

from replication.queue.epoch_history import EpochHistory
from replication.queue.failover import Promotion, ReplicaStatus, choose_leader
from replication.queue.follower_replica import FollowerReplica
from replication.queue.replication_leader import (
    FetchVerdict,
    FollowerProgress,
    Refuse,
    ReplicationLeader,
    ReplicationLimits,
    Reset,
    Stream,
    Truncate,
)
from segments.cursor_log import CursorLog
from segments.log import Log, LogConfig
from segments.memory_filesystem import MemoryFileSystem
from segments.range_set import RangeSet
from segments.record_batch import Record, RecordBatch

from .faults import CountingFileSystem, PowerCut

DIR = "/data/q"
# The leader's segments are small so that retention can delete some of them.
LEADER_LOG = LogConfig(segment_bytes_max=600, index_interval_bytes=64)


class NotConverging(AssertionError):
    """A follower kept fetching without reaching its leader's end."""


def all_batches(log: Log, start: int | None = None) -> list[RecordBatch]:
    offset = log.log_start_offset if start is None else start
    batches: list[RecordBatch] = []
    while offset < log.next_offset:
        found = log.read_batches(offset, 1 << 16)
        assert found, f"no batch at {offset} in {log.directory}"
        batches.extend(found)
        offset = found[-1].next_offset
    return batches


def batch_bytes(log: Log, start: int | None = None) -> list[bytes]:
    return [batch.data for batch in all_batches(log, start)]


def values(log: Log, start: int | None = None) -> dict[int, bytes]:
    return {record.offset: record.value
            for batch in all_batches(log, start) for record in batch.records()}


def state_shape(leader: ReplicationLeader) -> dict[str, object]:
    """Every attribute of the leader, containers by their length, progress by its fields."""
    shape: dict[str, object] = {}
    for name, value in vars(leader).items():
        if isinstance(value, dict):
            shape[name] = sorted(value)
            for key, item in value.items():
                assert isinstance(item, FollowerProgress)
                shape[f"{name}[{key}]"] = [f.name for f in dataclasses.fields(item)]
                assert all(isinstance(getattr(item, f.name), int)
                           for f in dataclasses.fields(item))
        elif isinstance(value, tuple | list | set):
            shape[name] = len(value)
        else:
            shape[name] = type(value).__name__
    return shape


@dataclass
class LeaderSide:
    log: Log
    cursor: CursorLog
    history: EpochHistory
    core: ReplicationLeader
    cursor_version: int = 0

    def close(self) -> None:
        self.log.close()
        self.cursor.close()


@dataclass(frozen=True)
class PowerCutAt:
    """Lose power `step` file operations into a follower's handling of a verdict."""

    step: int
    rng: random.Random


@dataclass
class Node:
    name: str
    fs: MemoryFileSystem
    disk: CountingFileSystem  # what the node's code writes through
    started_ms: int
    follower: FollowerReplica | None = None
    leader: LeaderSide | None = None
    up: bool = True

    @property
    def log(self) -> Log:
        if self.leader is not None:
            return self.leader.log
        assert self.follower is not None, f"{self.name} is down"
        return self.follower.log

    @property
    def history(self) -> EpochHistory:
        if self.leader is not None:
            return self.leader.history
        assert self.follower is not None, f"{self.name} is down"
        return self.follower.history

    @property
    def cursor(self) -> CursorLog:
        if self.leader is not None:
            return self.leader.cursor
        assert self.follower is not None, f"{self.name} is down"
        return self.follower.cursor

    def status(self) -> ReplicaStatus:
        return ReplicaStatus(self.name, self.log.next_offset, self.history.latest_epoch,
                             self.started_ms)

    def close(self) -> None:
        if self.leader is not None:
            self.leader.close()
            self.leader = None
        if self.follower is not None:
            self.follower.close()
            self.follower = None


@dataclass
class Cluster:
    names: tuple[str, ...]
    limits: ReplicationLimits = field(default_factory=ReplicationLimits)
    follower_log: LogConfig | None = None  # None: FollowerReplica's default (large segments)
    now_ms: int = 0
    epoch: int = 0
    leader_name: str = ""
    in_sync: tuple[str, ...] = ()  # as the controller last committed it
    nodes: dict[str, Node] = field(default_factory=dict)
    published: int = 0
    fetches: int = 0

    @classmethod
    def start(cls, names: tuple[str, ...] = ("a", "b", "c"),
              limits: ReplicationLimits | None = None,
              follower_log: LogConfig | None = None) -> Cluster:
        cluster = cls(names, limits or ReplicationLimits(), follower_log)
        for position, name in enumerate(names):
            fs = MemoryFileSystem()
            node = Node(name, fs, CountingFileSystem(fs, budget=-1), started_ms=position)
            node.follower = FollowerReplica.open(node.disk, DIR, follower_log)
            cluster.nodes[name] = node
        cluster.promote(names[0], names, high_watermark=0)
        return cluster

    # ------------------------------------------------------------ roles

    @property
    def leader(self) -> LeaderSide:
        side = self.nodes[self.leader_name].leader
        assert side is not None
        return side

    @property
    def core(self) -> ReplicationLeader:
        return self.leader.core

    def follower(self, name: str) -> FollowerReplica:
        replica = self.nodes[name].follower
        assert replica is not None, f"{name} is not a running follower"
        return replica

    def followers(self) -> list[str]:
        return [n for n in self.names if n != self.leader_name and self.nodes[n].up]

    def promote(self, name: str, in_sync: tuple[str, ...], high_watermark: int) -> None:
        """`name` becomes leader of the next epoch (the controller committed it)."""
        self.epoch += 1
        node = self.nodes[name]
        node.close()
        fs = node.disk
        log = Log.open(fs, os.path.join(DIR, "log"), LEADER_LOG)
        log.sync()
        cursor = CursorLog.open(fs, os.path.join(DIR, "cursor"))
        cursor.forget_from(log.next_offset)
        history = EpochHistory.load(fs, DIR)
        history.truncate_from(log.next_offset + 1)
        history.begin(self.epoch, log.next_offset)
        history.save(fs, DIR)
        core = ReplicationLeader(name, self.epoch, self.names, in_sync, log.next_offset,
                                 high_watermark, self.now_ms, self.limits)
        core.set_ack_floor(cursor.ack_floor)
        node.leader = LeaderSide(log, cursor, history, core)
        self.leader_name = name
        self.in_sync = core.in_sync

    def demote(self, name: str) -> None:
        """A leader (or a restarted node) opens its directory as a follower."""
        node = self.nodes[name]
        node.close()
        node.follower = FollowerReplica.open(node.disk, DIR, self.follower_log)
        node.up = True

    def fail_over(self, promote_out_of_sync: bool = False) -> Promotion | None:
        """The controller replaces the current leader, which is fenced (or down)."""
        old = self.leader_name
        statuses = [self.nodes[n].status() for n in self.followers()]
        promotion = choose_leader(old, self.in_sync, statuses, promote_out_of_sync)
        if promotion is None:
            return None
        heard = self.follower(promotion.leader).high_watermark
        hw = 0 if heard is None else heard  # unknown after a restart
        if self.nodes[old].up:
            self.demote(old)
        self.promote(promotion.leader, promotion.in_sync, hw)
        return promotion

    def crash(self, name: str, rng: random.Random | None = None) -> None:
        """Power loss on `name`: unsynced writes are lost (a random part of them with `rng`)."""
        node = self.nodes[name]
        if rng is None:
            node.fs.crash_losing_all_unsynced()
        else:
            node.fs.crash(rng)
        node.leader = None
        node.follower = None
        node.up = False

    def restart(self, name: str) -> None:
        self.demote(name)

    # ------------------------------------------------------------ the leader's work

    def publish(self, count: int, size: int = 20) -> None:
        records = []
        for _ in range(count):
            self.published += 1
            body = b"m%d-e%d-" % (self.published, self.epoch)
            records.append(Record(body + b"x" * max(0, size - len(body)), self.now_ms))
        self.leader.log.append(records, self.now_ms)
        self.core.leader_wrote(self.leader.log.next_offset)

    def leader_sync(self) -> None:
        self.leader.log.sync()
        self.core.leader_persisted(self.leader.log.next_offset)

    def ack(self, lo: int, hi: int) -> None:
        """Consumers ack `[lo, hi)` (delivered, hence below the high watermark)."""
        assert hi <= self.core.high_watermark
        self.leader.cursor.append([(lo, hi)])
        self.leader.cursor.sync()
        self.leader.cursor_version += 1
        self.core.set_ack_floor(self.leader.cursor.ack_floor)

    def delete_acked_segments(self) -> int:
        """Retention on the leader: whole segments below the ack floor go."""
        side = self.leader
        deleted = side.log.delete_before(min(side.cursor.ack_floor, self.core.high_watermark))
        side.history.forget_below(side.log.log_start_offset)
        side.history.save(self.nodes[self.leader_name].disk, DIR)
        return deleted

    def tick(self) -> tuple[str, ...] | None:
        """The leader proposes an in-sync change; the controller commits it at once."""
        proposal = self.core.tick(self.now_ms)
        if proposal is not None:
            self.core.in_sync_committed(proposal)
            self.in_sync = proposal
        return proposal

    # ------------------------------------------------------------ the protocol

    def fetch(self, name: str, max_bytes: int = 1 << 20,
              cut: PowerCutAt | None = None) -> FetchVerdict:
        """One fetch and its handling; with `cut`, the follower is down afterwards."""
        self.fetches += 1
        replica = self.follower(name)
        side = self.leader
        verdict = side.core.on_fetch(name, self.epoch, replica.next_offset, replica.last_epoch,
                                     side.history, side.log.log_start_offset, self.now_ms,
                                     replica.log_start)
        disk = self.nodes[name].disk
        if cut is not None:
            disk.budget = disk.steps + cut.step
        try:
            self._handle(replica, verdict, max_bytes)
        except PowerCut:
            pass
        finally:
            disk.budget = -1
        if cut is not None:
            self.crash(name, cut.rng)
        return verdict

    def _handle(self, replica: FollowerReplica, verdict: FetchVerdict, max_bytes: int) -> None:
        side = self.leader
        if isinstance(verdict, Stream):
            batches = []
            if verdict.from_offset < side.log.next_offset:
                batches = side.log.read_batches(verdict.from_offset, max_bytes)
                assert batches[0].base_offset == verdict.from_offset, "fetch inside a batch"
            replica.append([batch.data for batch in batches], side.history.entries)
            replica.sync()
            replica.apply_acks(side.cursor.acked.ranges(), side.cursor_version)
            replica.follow_log_start(side.log.log_start_offset)
            replica.high_watermark = side.core.high_watermark
        elif isinstance(verdict, Truncate):
            replica.truncate(verdict)
        elif isinstance(verdict, Reset):
            replica.reset(verdict.start_offset)
        else:
            assert isinstance(verdict, Refuse)

    def catch_up(self, name: str, max_bytes: int = 1 << 20, limit: int = 10_000) -> list[
            FetchVerdict]:
        """Fetch until the follower holds the leader's whole log and acks; return the verdicts."""
        verdicts: list[FetchVerdict] = []
        for _ in range(limit):
            verdict = self.fetch(name, max_bytes)
            verdicts.append(verdict)
            replica = self.follower(name)
            if (isinstance(verdict, Stream) and replica.next_offset == self.leader.log.next_offset
                    and replica.acked_version == self.leader.cursor_version):
                # One more round reports the end, so the leader counts the copy.
                verdicts.append(self.fetch(name, max_bytes))
                return verdicts
            if isinstance(verdict, Refuse):
                raise NotConverging(f"{name}: {verdict.reason}")
        raise NotConverging(f"{name} did not catch up in {limit} fetches: "
                            f"{[type(v).__name__ for v in verdicts[-6:]]} "
                            f"{verdicts[-3:]}")

    def catch_up_all(self, max_bytes: int = 1 << 20) -> None:
        for name in self.followers():
            self.catch_up(name, max_bytes)

    def assert_converged(self, exact_acks: bool = True) -> None:
        """Every running follower holds the leader's log byte for byte, its acks, its epochs."""
        side = self.leader
        start = side.log.log_start_offset
        leader_bytes = batch_bytes(side.log)
        for name in self.followers():
            replica = self.follower(name)
            assert replica.next_offset == side.log.next_offset, name
            # A follower may have deleted more than this leader (it followed another one).
            common = max(start, replica.log_start)
            assert batch_bytes(replica.log, common) == batch_bytes(side.log, common), name
            if replica.log_start <= start:
                assert batch_bytes(replica.log, start) == leader_bytes, name
            # The same epoch for every record (an epoch with no records yet may be missing).
            assert replica.last_epoch <= side.history.latest_epoch, name
            for offset in range(common, side.log.next_offset):
                assert replica.history.epoch_at(offset) == side.history.epoch_at(offset), (
                    name, offset)
            # Every ack of the leader is here. A follower may hold more: acks its old
            # leader took that never reached this one (apply_acks only adds).
            for lo, hi in side.cursor.acked:
                assert replica.cursor.acked.covers(max(lo, common), hi), (name, lo, hi)
            if exact_acks:
                acked = _from_offset(side.cursor.acked, common)
                assert _from_offset(replica.cursor.acked, common) == acked, name


def _from_offset(ranges: RangeSet, offset: int) -> RangeSet:
    """The offsets of `ranges` at or past `offset`."""
    return RangeSet((max(lo, offset), hi) for lo, hi in ranges if hi > offset)
