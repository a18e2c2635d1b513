"""A replicated queue's leader shell: the high watermark gates readiness and confirms, and
a promoted copy flags what its predecessor may have delivered."""

from __future__ import annotations

import asyncio

import pytest
from pamqp import commands

from logbroker.message import Message
from logbroker.queue.queue_limits import Admission, QueueLimits
from logbroker.queue.queue_shell import QueueSettings, QueueShell
from logbroker.queue.replica_setup import ReplicaSetup
from logbroker.queue.replication_gate import GateFenced, NotEnoughReplicas, ReplicationGate
from segments.memory_filesystem import MemoryFileSystem

SETTINGS = QueueSettings(vhost="/", name="q", durable=True, limits=QueueLimits())
MEMBERS = ("n1", "n2", "n3")


def message(body: bytes) -> Message:
    return Message("", "q", body, commands.Basic.Properties(delivery_mode=2))


async def write(shell: QueueShell, count: int) -> list[asyncio.Future[int]]:
    confirms = []
    for index in range(count):
        m = message(f"m{index}".encode())
        assert shell.admit(m) is Admission.ACCEPT
        confirms.append(shell.append(m))
    await asyncio.sleep(0.05)  # written and durable (fsync policy of the default: interval)
    return confirms


def fetch(gate: ReplicationGate, follower: str, next_offset: int) -> None:
    gate.moved(lambda: gate.leader.on_fetch(follower, gate.leader.epoch, next_offset,
                                            gate.leader.epoch, gate.history, 0, 0))


def drain(shell: QueueShell) -> list[tuple[int, bool]]:
    got = []
    while (found := shell.get("ch", no_ack=False)) is not None:
        got.append((found[0], found[1]))
    return got


@pytest.mark.asyncio
async def test_messages_are_ready_and_confirmed_only_below_the_high_watermark() -> None:
    fs = MemoryFileSystem()
    shell = QueueShell.open(SETTINGS, fs, "/q", ReplicaSetup("n1", 1, MEMBERS, MEMBERS))
    gate = shell.replication
    assert gate is not None
    confirms = await write(shell, 3)
    assert drain(shell) == [] and not any(c.done() for c in confirms)
    fetch(gate, "n2", 3)
    assert drain(shell) == [] and not any(c.done() for c in confirms)  # n3 has nothing yet
    fetch(gate, "n3", 2)
    await asyncio.sleep(0)
    assert [c.done() for c in confirms] == [True, True, False]
    assert drain(shell) == [(0, False), (1, False)]
    fetch(gate, "n3", 3)
    await asyncio.sleep(0)
    assert all(c.done() for c in confirms) and drain(shell) == [(2, False)]
    await shell.close()


@pytest.mark.asyncio
async def test_publishes_the_high_watermark_passes_with_too_few_in_sync_replicas_are_nacked(
) -> None:
    shell = QueueShell.open(SETTINGS, MemoryFileSystem(), "/q",
                            ReplicaSetup("n1", 1, MEMBERS, MEMBERS))
    gate = shell.replication
    assert gate is not None
    confirms = await write(shell, 3)
    fetch(gate, "n2", 1)
    fetch(gate, "n3", 1)
    await asyncio.sleep(0)
    assert [c.done() for c in confirms] == [True, False, False]  # m0 has three copies
    # n2 and n3 fall behind and leave the in-sync set: the high watermark jumps to
    # the leader's end, with one copy where the queue needs two (a majority of three).
    gate.moved(lambda: gate.leader.in_sync_committed(("n1",)))
    await asyncio.sleep(0)
    assert confirms[0].result() == 0
    for confirm in confirms[1:]:
        with pytest.raises(NotEnoughReplicas, match="only 1 of the 2 in-sync replicas"):
            confirm.result()
    assert drain(shell) == [(0, False), (1, False), (2, False)]  # written: deliverable
    # n2 catches up and is back: a new publish is confirmed as usual.
    fetch(gate, "n2", 3)
    gate.moved(lambda: gate.leader.in_sync_committed(("n1", "n2")))
    [later] = await write(shell, 1)
    assert not later.done()
    fetch(gate, "n2", 4)
    await asyncio.sleep(0)
    assert later.result() == 3
    await shell.close()


@pytest.mark.asyncio
async def test_too_few_in_sync_replicas_refuse_publishes() -> None:
    shell = QueueShell.open(SETTINGS, MemoryFileSystem(), "/q",
                            ReplicaSetup("n1", 1, MEMBERS, ("n1",)))
    assert shell.admit(message(b"x")) is Admission.REJECT
    refusal = shell.refusal  # the REST answer says why
    assert "in-sync" in refusal and "x-overflow" not in refusal
    await shell.close()


@pytest.mark.asyncio
async def test_a_promoted_copy_flags_held_messages_its_predecessor_may_have_delivered() -> None:
    fs = MemoryFileSystem()
    copy = QueueShell.open(SETTINGS, fs, "/q")
    await write(copy, 3)
    await copy.close()
    # promoted: the last high watermark this copy heard was 1, its log ends at 3
    shell = QueueShell.open(SETTINGS, fs, "/q", ReplicaSetup(
        "n2", 2, ("n2", "n1", "n3"), ("n2", "n3"), high_watermark=1))
    gate = shell.replication
    assert gate is not None and gate.high_watermark == 1
    fetch(gate, "n3", 3)  # n3 holds everything: 1 and 2 are released now
    assert drain(shell) == [(0, True), (1, True), (2, True)]
    await shell.close()
    # a crash before anything else: the mark already says so
    reopened = QueueShell.open(SETTINGS, fs, "/q", ReplicaSetup(
        "n2", 2, ("n2", "n1", "n3"), ("n2",)))
    assert [redelivered for _, redelivered in drain(reopened)] == [True, True, True]
    await reopened.close()


def fetch_with_acks(gate: ReplicationGate, follower: str, next_offset: int,
                    acked_version: int) -> None:
    def judge() -> None:
        gate.leader.on_fetch(follower, gate.leader.epoch, next_offset, gate.leader.epoch,
                             gate.history, 0, 0)
        gate.leader.follower_acked_version(follower, acked_version)
    gate.moved(judge)


@pytest.mark.asyncio
async def test_settles_are_durable_once_every_in_sync_follower_holds_them() -> None:
    fs = MemoryFileSystem()
    shell = QueueShell.open(SETTINGS, fs, "/q", ReplicaSetup("n1", 2, MEMBERS, MEMBERS))
    gate = shell.replication
    assert gate is not None
    await write(shell, 2)
    for follower in ("n2", "n3"):
        fetch(gate, follower, 2)
    offset = drain(shell)[0][0]
    shell.ack([offset])
    waiting = asyncio.ensure_future(shell.settles_durable())
    await asyncio.sleep(0.05)
    assert shell.cursor.ack_floor == 1 and not waiting.done()  # on disk here, not there
    version = gate.acked_version
    assert version > 2 << 32  # versions start at the epoch: older leaders' are smaller
    fetch_with_acks(gate, "n2", 2, version)
    fetch_with_acks(gate, "n3", 2, (1 << 32) + 99)  # a version from epoch 1's leader
    await asyncio.sleep(0)
    assert not waiting.done()
    fetch_with_acks(gate, "n3", 2, version)
    await asyncio.wait_for(waiting, 1.0)
    gate.fence("epoch 3 began")
    with pytest.raises(GateFenced):
        await shell.settles_durable()
    await shell.close()


@pytest.mark.asyncio
async def test_an_isolated_leader_holds_its_acks_until_it_rejoins_and_a_fenced_one_drops_them(
) -> None:
    shell = QueueShell.open(SETTINGS, MemoryFileSystem(), "/q",
                            ReplicaSetup("n1", 1, MEMBERS, MEMBERS))
    gate = shell.replication
    assert gate is not None
    await write(shell, 3)
    for follower in ("n2", "n3"):
        fetch(gate, follower, 3)
    offsets = [offset for offset, _ in drain(shell)]
    assert offsets == [0, 1, 2]
    gate.isolate("the node lost the controller")
    shell.ack([0])
    assert shell.core.unacked_count == 3  # held: maybe another leader settles them now
    gate.rejoin()  # still this epoch's leader: the held ack counts
    assert (shell.core.unacked_count, shell.counters.acked) == (2, 1)
    gate.isolate("the node lost the controller again")
    shell.ack([1])
    gate.fence("epoch 2 began")  # replaced: nothing held counts, the new leader redelivers
    gate.rejoin()
    assert (shell.core.unacked_count, shell.counters.acked) == (2, 1)
    await shell.close()
