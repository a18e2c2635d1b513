"""RaftDriver: real drivers, storage and timers in one event loop, wired by an in-memory network."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType

import pytest

from replication.raft import (
    EMPTY_MEMBERSHIP,
    ChangeKind,
    ConfigChange,
    Membership,
    Message,
    NotLeader,
    ProposalRefused,
    RaftConfig,
    Role,
    Snapshot,
    SoftState,
)
from replication.raft.driver import (
    DriverStopped,
    ProposalDropped,
    ProposalTimeout,
    RaftDriver,
)
from replication.raft.messages import InstallSnapshot
from replication.raft.wire import decode_message, encode_message
from segments.filesystem import FileSystem, RealFileSystem
from segments.memory_filesystem import MemoryFileSystem

pytestmark = pytest.mark.timeout(60)

TICK_S = 0.01
CONFIG = RaftConfig(election_ticks=10, heartbeat_ticks=1)
ABC = Membership.of(["a", "b", "c"])


class Machine:
    """Keeps every applied command; `apply` fails for commands starting with b"fail"."""

    def __init__(self) -> None:
        self.applied: list[tuple[int, bytes]] = []
        self.restores: list[int] = []

    def apply(self, index: int, data: bytes) -> object:
        if data.startswith(b"fail"):
            raise ValueError(f"refused {data!r}")
        self.applied.append((index, data))
        return f"{index}:{data.decode()}"

    def snapshot(self) -> bytes:
        return json.dumps([[index, data.hex()] for index, data in self.applied]).encode()

    def restore(self, index: int, data: bytes) -> None:
        self.applied = [(i, bytes.fromhex(d)) for i, d in json.loads(data)]
        self.restores.append(index)

    @property
    def commands(self) -> list[bytes]:
        return [data for _, data in self.applied]


class Network:
    """Delivers on the next loop iteration; nodes in `cut` neither send nor receive."""

    def __init__(self, encode: bool) -> None:
        self.encode = encode
        self.drivers: dict[str, RaftDriver] = {}
        self.cut: set[str] = set()
        self.snapshots_sent: dict[str, int] = {}
        self.bytes_delivered = 0

    def sender(self) -> Callable[[Message], None]:
        def send(message: Message) -> None:
            if isinstance(message, InstallSnapshot):
                count = self.snapshots_sent.get(message.target, 0)
                self.snapshots_sent[message.target] = count + 1
            payload: Message | bytes = encode_message(message) if self.encode else message
            asyncio.get_running_loop().call_soon(
                self._deliver, message.source, message.target, payload
            )
        return send

    def _deliver(self, source: str, target: str, payload: Message | bytes) -> None:
        if source in self.cut or target in self.cut:
            return
        driver = self.drivers.get(target)
        if driver is None:
            return
        if isinstance(payload, bytes):
            self.bytes_delivered += len(payload)
            payload = decode_message(payload)
        driver.step(payload)


class Cluster:
    def __init__(
        self,
        fs: FileSystem,
        root: str,
        nodes: Iterable[str] = ("a", "b", "c"),
        *,
        encode: bool = False,
        snapshot_every: int = 1000,
        max_pending: int = 10_000,
    ) -> None:
        self.fs = fs
        self.root = root
        self.founding = Membership.of(nodes)
        self.network = Network(encode)
        self.snapshot_every = snapshot_every
        self.max_pending = max_pending
        self.machines: dict[str, Machine] = {}
        self.roles: dict[str, list[SoftState]] = {}
        self.memberships: dict[str, list[Membership]] = {}

    async def __aenter__(self) -> Cluster:
        for node_id in sorted(self.founding.nodes):
            self.open(node_id)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for driver in list(self.network.drivers.values()):
            await driver.stop()

    @property
    def drivers(self) -> dict[str, RaftDriver]:
        return self.network.drivers

    def open(self, node_id: str, founding: Membership | None = None,
             start: bool = True) -> RaftDriver:
        machine = self.machines[node_id] = Machine()
        driver = RaftDriver.open(
            self.fs, f"{self.root}/{node_id}", node_id,
            self.founding if founding is None else founding, machine, self.network.sender(),
            config=CONFIG, rng=random.Random(f"seed-{node_id}"), tick_interval_s=TICK_S,
            snapshot_every=self.snapshot_every, max_pending_proposals=self.max_pending,
        )
        driver.on_role_change = self.roles.setdefault(node_id, []).append
        driver.on_membership_change = self.memberships.setdefault(node_id, []).append
        self.drivers[node_id] = driver
        if start:
            driver.start()
        return driver

    async def stop(self, node_id: str) -> None:
        await self.drivers.pop(node_id).stop()

    def connected(self) -> list[RaftDriver]:
        return [d for node_id, d in sorted(self.drivers.items())
                if node_id not in self.network.cut]

    async def leader(self, timeout: float = 5.0) -> RaftDriver:
        """The leader every connected member follows."""
        def settled() -> RaftDriver | None:
            connected = self.connected()
            leaders = [d for d in connected if d.is_leader]
            if len(leaders) != 1:
                return None
            members = [d for d in connected if d.node_id in leaders[0].membership.nodes]
            if all(d.leader_id == leaders[0].node_id for d in members):
                return leaders[0]
            return None
        await wait_until(lambda: settled() is not None, timeout, "a settled leader")
        found = settled()
        assert found is not None
        return found

    async def converged(self, timeout: float = 5.0) -> None:
        """Every connected node has applied what the leader applied, identically."""
        leader = await self.leader()
        target = leader.applied_index
        await wait_until(
            lambda: all(d.applied_index >= target for d in self.connected()), timeout,
            f"every node applying up to {target}",
        )
        reference = self.machines[leader.node_id].applied
        for driver in self.connected():
            applied = self.machines[driver.node_id].applied
            assert applied[: len(reference)] == reference, driver.node_id


async def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.005)


@pytest.fixture
def real_fs() -> RealFileSystem:
    return RealFileSystem()


# ----------------------------------------------------------------------- tests


@pytest.mark.parametrize("encode", [False, True], ids=["objects", "wire-bytes"])
async def test_a_leader_is_elected_and_proposals_return_apply_results(
    real_fs: RealFileSystem, tmp_path: Path, encode: bool
) -> None:
    async with Cluster(real_fs, str(tmp_path), encode=encode) as cluster:
        leader = await cluster.leader()
        assert leader.role is Role.LEADER and leader.term >= 2
        first = await leader.propose(b"one")
        assert first == f"{leader.applied_index}:one"
        results = await asyncio.gather(*(leader.propose(b"cmd%d" % i) for i in range(30)))
        indexes = [int(str(result).split(":")[0]) for result in results]
        assert indexes == sorted(indexes) and len(set(indexes)) == 30
        assert results[-1] == f"{indexes[-1]}:cmd29"
        assert leader.commit_index >= leader.applied_index == indexes[-1]
        await cluster.converged()
        expected = [b"one", *(b"cmd%d" % i for i in range(30))]
        for node_id in "abc":
            assert cluster.machines[node_id].commands == expected
            assert cluster.memberships[node_id][0] == ABC  # the founding CONFIG entry
        assert SoftState(leader.node_id, Role.LEADER) in cluster.roles[leader.node_id]
        if encode:
            assert cluster.network.bytes_delivered > 0


async def test_propose_on_a_follower_raises_not_leader_with_the_hint(
    real_fs: RealFileSystem, tmp_path: Path
) -> None:
    async with Cluster(real_fs, str(tmp_path)) as cluster:
        leader = await cluster.leader()
        follower = next(d for d in cluster.drivers.values() if not d.is_leader)
        with pytest.raises(NotLeader) as caught:
            await follower.propose(b"x")
        assert caught.value.leader_hint == leader.node_id
        with pytest.raises(NotLeader):
            follower.transfer_leadership(leader.node_id)


async def test_an_exception_from_apply_reaches_the_proposer_only(
    real_fs: RealFileSystem, tmp_path: Path
) -> None:
    async with Cluster(real_fs, str(tmp_path)) as cluster:
        leader = await cluster.leader()
        with pytest.raises(ValueError, match="refused b'fail-1'"):
            await leader.propose(b"fail-1")
        assert await leader.propose(b"fine") == f"{leader.applied_index}:fine"
        await cluster.converged()
        for machine in cluster.machines.values():
            assert machine.commands == [b"fine"]


async def test_a_cut_off_leader_is_replaced_and_its_proposal_ends(
    real_fs: RealFileSystem, tmp_path: Path
) -> None:
    async with Cluster(real_fs, str(tmp_path)) as cluster:
        old = await cluster.leader()
        await old.propose(b"before")
        cluster.network.cut.add(old.node_id)
        started = asyncio.get_running_loop().time()
        with pytest.raises((ProposalDropped, ProposalTimeout)):
            await old.propose(b"lost", timeout_s=3.0)
        # check-quorum makes the isolated leader step down after an election timeout.
        assert asyncio.get_running_loop().time() - started < 2.0
        assert not old.is_leader
        new = await cluster.leader()
        assert new is not old
        assert await new.propose(b"after") == f"{new.applied_index}:after"
        cluster.network.cut.clear()
        await cluster.converged()
        assert await cluster.leader() is new
        for machine in cluster.machines.values():
            assert machine.commands == [b"before", b"after"]


async def test_a_restarted_node_restores_its_snapshot_replays_and_catches_up(
    real_fs: RealFileSystem, tmp_path: Path
) -> None:
    async with Cluster(real_fs, str(tmp_path), snapshot_every=5) as cluster:
        leader = await cluster.leader()
        for i in range(12):
            await leader.propose(b"first%d" % i)
        await cluster.converged()
        victim = next(d.node_id for d in cluster.drivers.values() if not d.is_leader)
        before = list(cluster.machines[victim].applied)
        snapshot = cluster.drivers[victim].node.raft_log.snapshot_index
        assert snapshot >= 5
        await cluster.stop(victim)
        for i in range(6):
            await leader.propose(b"second%d" % i)

        reopened = cluster.open(victim, start=False)
        machine = cluster.machines[victim]
        assert machine.restores == [snapshot]  # from the persisted snapshot...
        assert reopened.applied_index == snapshot
        assert machine.applied == [entry for entry in before if entry[0] <= snapshot]
        reopened.start()
        await cluster.converged()  # ...then replay and catch up from the leader
        assert machine.commands == [b"first%d" % i for i in range(12)] + [
            b"second%d" % i for i in range(6)
        ]


async def test_the_whole_cluster_restarts_with_its_state(tmp_path: Path) -> None:
    fs = MemoryFileSystem()
    async with Cluster(fs, "/raft") as cluster:
        leader = await cluster.leader()
        for i in range(8):
            await leader.propose(b"c%d" % i)
        await cluster.converged()
        term = leader.term
        for node_id in "abc":
            await cluster.stop(node_id)
        for node_id in "abc":
            cluster.open(node_id)  # the founding membership is ignored now
        leader = await cluster.leader()
        assert leader.term > term
        await leader.propose(b"more")
        await cluster.converged()
        for machine in cluster.machines.values():
            assert machine.restores == []
            assert machine.commands == [b"c%d" % i for i in range(8)] + [b"more"]


async def test_a_node_behind_the_compaction_point_gets_the_snapshot(
    real_fs: RealFileSystem, tmp_path: Path
) -> None:
    async with Cluster(real_fs, str(tmp_path), snapshot_every=5, encode=True) as cluster:
        leader = await cluster.leader()
        await leader.propose(b"early")
        await cluster.converged()
        behind = next(d for d in cluster.drivers.values() if not d.is_leader)
        cluster.network.cut.add(behind.node_id)
        for i in range(20):
            await leader.propose(b"c%d" % i)
        assert leader.node.raft_log.snapshot_index > behind.node.raft_log.last_index
        cluster.network.cut.clear()
        await cluster.converged()
        assert cluster.network.snapshots_sent.get(behind.node_id, 0) >= 1
        machine = cluster.machines[behind.node_id]
        assert machine.restores and machine.restores[0] > 5
        assert machine.commands == [b"early", *(b"c%d" % i for i in range(20))]
        assert cluster.memberships[behind.node_id][-1] == ABC  # reported with the snapshot


async def test_a_fourth_node_joins_by_config_change_and_receives_everything(
    real_fs: RealFileSystem, tmp_path: Path
) -> None:
    async with Cluster(real_fs, str(tmp_path)) as cluster:
        leader = await cluster.leader()
        for i in range(5):
            await leader.propose(b"c%d" % i)
        joiner = cluster.open("d", founding=EMPTY_MEMBERSHIP)
        assert joiner.membership == EMPTY_MEMBERSHIP
        await leader.propose_config_change(ConfigChange(ChangeKind.ADD_LEARNER, "d"))
        await wait_until(lambda: joiner.applied_index == leader.applied_index, 5,
                         "the learner catching up")
        await leader.propose_config_change(ConfigChange(ChangeKind.ADD_VOTER, "d"))
        abcd = Membership.of(["a", "b", "c", "d"])
        assert leader.membership == abcd
        await leader.propose(b"with-d")
        await cluster.converged()
        assert joiner.membership == abcd
        assert cluster.machines["d"].commands == [*(b"c%d" % i for i in range(5)), b"with-d"]
        assert cluster.memberships["d"] == [ABC, Membership.of(["a", "b", "c"], ["d"]), abcd]
        # Four voters: any three commit, so losing one leaves the group working.
        other = next(node_id for node_id in "abc" if node_id != leader.node_id)
        cluster.network.cut.add(other)
        await leader.propose(b"three-of-four")


async def test_a_leader_cut_from_the_quorum_times_out_or_drops_and_never_hangs(
    real_fs: RealFileSystem, tmp_path: Path
) -> None:
    async with Cluster(real_fs, str(tmp_path)) as cluster:
        leader = await cluster.leader()
        await leader.propose(b"ok")
        cluster.network.cut.add(leader.node_id)
        with pytest.raises(ProposalTimeout, match=r"not applied within 0\.03s"):
            await leader.propose(b"quick", timeout_s=0.03)  # before check-quorum kicks in
        with pytest.raises((ProposalDropped, ProposalTimeout)):
            await leader.propose(b"slow", timeout_s=5.0)
        with pytest.raises(ProposalTimeout, match="not applied"):
            await leader.wait_applied(leader.applied_index + 1, timeout_s=0.05)


async def test_pending_proposals_are_bounded(tmp_path: Path) -> None:
    async with Cluster(MemoryFileSystem(), "/raft", max_pending=3) as cluster:
        leader = await cluster.leader()
        cluster.network.cut.add(leader.node_id)
        waiting = [asyncio.create_task(leader.propose(b"p%d" % i)) for i in range(3)]
        await asyncio.sleep(0)
        with pytest.raises(ProposalRefused, match="too many pending proposals"):
            await leader.propose(b"one-too-many")
        results = await asyncio.gather(*waiting, return_exceptions=True)
        assert all(isinstance(r, ProposalDropped | ProposalTimeout) for r in results)


async def test_stop_fails_pending_proposals_and_later_requests(tmp_path: Path) -> None:
    async with Cluster(MemoryFileSystem(), "/raft") as cluster:
        leader = await cluster.leader()
        cluster.network.cut.add(leader.node_id)
        pending = asyncio.create_task(leader.propose(b"never"))
        waiting = asyncio.create_task(leader.wait_applied(1000, timeout_s=5))
        await asyncio.sleep(0.001)
        await cluster.stop(leader.node_id)
        with pytest.raises(ProposalDropped, match="stopped"):
            await pending
        with pytest.raises(DriverStopped):
            await waiting
        with pytest.raises(DriverStopped, match="stopped"):
            await leader.propose(b"after")
        await leader.stop()  # idempotent


async def test_a_storage_failure_stops_the_driver_loudly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fs = MemoryFileSystem()
    async with Cluster(fs, "/raft", nodes=["solo"]) as cluster:
        solo = await cluster.leader()
        assert await solo.propose(b"fine") == f"{solo.applied_index}:fine"
        fs.fail_sync = True
        with pytest.raises(DriverStopped, match="persisting Raft state failed"):
            await solo.propose(b"doomed", timeout_s=5)
        assert "persisting Raft state failed" in caplog.text
        with pytest.raises(DriverStopped, match="failed") as caught:
            await solo.propose(b"later")
        assert isinstance(caught.value.__cause__, OSError)
        with pytest.raises(DriverStopped):
            await solo.wait_applied(solo.applied_index + 1, timeout_s=1)
        fs.fail_sync = False


async def test_leadership_can_be_transferred(real_fs: RealFileSystem, tmp_path: Path) -> None:
    async with Cluster(real_fs, str(tmp_path)) as cluster:
        leader = await cluster.leader()
        await leader.propose(b"x")
        target = next(node_id for node_id in "abc" if node_id != leader.node_id)
        leader.transfer_leadership(target)
        await wait_until(lambda: cluster.drivers[target].is_leader, 5, "the handover")
        new = await cluster.leader()
        assert new.node_id == target
        assert await new.propose(b"y") == f"{new.applied_index}:y"
        await cluster.converged()


async def test_messages_for_another_node_are_ignored(tmp_path: Path) -> None:
    async with Cluster(MemoryFileSystem(), "/raft") as cluster:
        leader = await cluster.leader()
        term = leader.term
        stray = InstallSnapshot(source="x", target="zz", term=term + 5,
                                snapshot=Snapshot(1, 1, ABC, b""))
        leader.step(stray)
        await asyncio.sleep(0.02)
        assert leader.is_leader and leader.term == term

