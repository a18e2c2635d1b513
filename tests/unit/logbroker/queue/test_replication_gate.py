"""ReplicationGate: it says what a move of the high watermark lets go (a Release) and
leaves applying it to the shell."""

from __future__ import annotations

from logbroker.queue.replication_gate import Release, ReplicationGate
from replication.queue.epoch_history import EpochHistory
from replication.queue.replication_leader import ReplicationLeader

MEMBERS = ("n1", "n2", "n3")


class Listener:
    def __init__(self) -> None:
        self.releases: list[Release] = []
        self.abandoned: list[str] = []

    def release(self, release: Release) -> None:
        self.releases.append(release)

    def abandon(self, reason: str) -> None:
        self.abandoned.append(reason)


def gate_of(in_sync: tuple[str, ...] = MEMBERS) -> tuple[ReplicationGate, Listener]:
    leader = ReplicationLeader("n1", 1, MEMBERS, in_sync, durable_end=0, high_watermark=0,
                               now_ms=0)
    history = EpochHistory()
    history.begin(1, 0)
    gate = ReplicationGate(leader, history)
    listener = Listener()
    gate.listener = listener
    return gate, listener


def fetch(gate: ReplicationGate, follower: str, next_offset: int) -> Release | None:
    return gate.moved(lambda: gate.leader.on_fetch(follower, 1, next_offset, 1, gate.history,
                                                   0, 0))


def test_the_leaders_own_fsync_returns_the_release_to_the_shell() -> None:
    gate, listener = gate_of()
    gate.wrote(3)
    assert gate.persisted(3) == Release(0, None)  # the followers have nothing yet
    assert fetch(gate, "n2", 3) is None  # n3 has nothing: the high watermark stays
    release = fetch(gate, "n3", 2)
    assert release == Release(2, None) and listener.releases == [release]
    assert gate.persisted(3) == Release(2, None) and listener.releases == [release]


def test_a_release_past_too_few_in_sync_replicas_carries_the_refusal() -> None:
    gate, listener = gate_of()
    gate.wrote(2)
    gate.persisted(2)
    release = gate.moved(lambda: gate.leader.in_sync_committed(("n1",)))
    assert release is not None and release.high_watermark == 2
    assert release.refusal is not None and "in-sync" in release.refusal
    assert listener.releases == [release]


def test_fencing_tells_the_listener_once() -> None:
    gate, listener = gate_of()
    gate.fence("epoch 2 began")
    gate.fence("again")
    assert listener.abandoned == ["epoch 2 began"]
