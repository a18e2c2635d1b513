"""RaftStorage on the in-memory file system: persist, lose power, recover."""

import random

import pytest

from replication.raft import (
    Entry,
    EntryKind,
    HardState,
    InvariantError,
    Membership,
    PersistedState,
    RaftConfig,
    RaftNode,
    RaftStorage,
    Ready,
    Role,
    Snapshot,
)
from replication.raft.storage import RaftStorageCorruptError, encode_snapshot
from segments.filesystem import write_file_atomically
from segments.log import LogConfig
from segments.memory_filesystem import MemoryFileSystem

DIR = "/data/raft"
SMALL_SEGMENTS = LogConfig(segment_bytes_max=512, index_interval_bytes=64)
ABC = Membership.of(["a", "b", "c"])


def entries(first: int, last: int, term: int) -> tuple[Entry, ...]:
    return tuple(Entry(term, i, EntryKind.NORMAL, b"cmd-%d-%d" % (i, term) * 3)
                 for i in range(first, last + 1))


def ready(
    new: tuple[Entry, ...] = (),
    hard_state: HardState | None = None,
    snapshot: Snapshot | None = None,
) -> Ready:
    return Ready(hard_state=hard_state, entries=new, snapshot=snapshot, messages=(),
                 committed_entries=(), soft_state=None, must_sync=True)


def reopen(fs: MemoryFileSystem) -> RaftStorage:
    return RaftStorage.open(fs, DIR, SMALL_SEGMENTS)


def load(fs: MemoryFileSystem) -> PersistedState | None:
    storage = reopen(fs)
    try:
        return storage.load()
    finally:
        storage.close()


@pytest.fixture
def fs() -> MemoryFileSystem:
    return MemoryFileSystem()


def test_a_new_directory_holds_no_state(fs: MemoryFileSystem) -> None:
    assert load(fs) is None


def test_saved_state_round_trips(fs: MemoryFileSystem) -> None:
    storage = reopen(fs)
    state = HardState(term=2, vote="a", commit=3)
    storage.save(ready(entries(1, 5, 2), state))
    storage.close()
    assert load(fs) == PersistedState(state, None, entries(1, 5, 2))


def test_replacing_entries_cut_the_persisted_tail(fs: MemoryFileSystem) -> None:
    storage = reopen(fs)
    storage.save(ready(entries(1, 5, 1), HardState(1, None, 0)))
    storage.save(ready(entries(3, 4, 2), HardState(2, None, 0)))
    storage.close()
    loaded = load(fs)
    assert loaded is not None
    assert loaded.entries == entries(1, 2, 1) + entries(3, 4, 2)


def test_entries_that_leave_a_gap_are_refused(fs: MemoryFileSystem) -> None:
    storage = reopen(fs)
    storage.save(ready(entries(1, 2, 1), HardState(1, None, 0)))
    with pytest.raises(InvariantError, match="do not continue"):
        storage.save(ready(entries(5, 6, 1)))


def test_a_power_cut_before_the_sync_loses_only_that_ready(fs: MemoryFileSystem) -> None:
    storage = reopen(fs)
    durable = HardState(term=2, vote="a", commit=1)
    storage.save(ready(entries(1, 3, 2), durable))
    storage.write(ready(entries(4, 6, 3), HardState(term=3, vote="b", commit=1)))
    fs.crash_losing_all_unsynced()
    assert load(fs) == PersistedState(durable, None, entries(1, 3, 2))


@pytest.mark.parametrize("seed", range(60))
def test_a_power_cut_keeps_a_clean_prefix_of_the_unsynced_entries(seed: int) -> None:
    fs = MemoryFileSystem()
    storage = reopen(fs)
    durable = HardState(term=2, vote="a", commit=1)
    storage.save(ready(entries(1, 30, 2), durable))
    unsynced = entries(31, 60, 2)
    storage.write(ready(unsynced))
    fs.crash(random.Random(seed))
    loaded = load(fs)
    assert loaded is not None and loaded.hard_state == durable
    kept = loaded.entries[30:]
    assert loaded.entries[:30] == entries(1, 30, 2)
    assert kept == unsynced[: len(kept)]  # a torn last batch is cut whole


def test_the_hard_state_file_is_rewritten_only_when_term_or_vote_change(
    fs: MemoryFileSystem,
) -> None:
    storage = reopen(fs)
    storage.save(ready(entries(1, 9, 2), HardState(2, "a", 5)))
    storage.save(ready((), HardState(2, "a", 9)))  # commit alone: not worth an fsync
    storage.close()
    loaded = load(fs)
    assert loaded is not None and loaded.hard_state == HardState(2, "a", 5)
    storage = reopen(fs)
    storage.load()  # learns what is on disk, so it can tell what changed
    storage.save(ready((), HardState(3, None, 9)))
    storage.close()
    loaded = load(fs)
    assert loaded is not None and loaded.hard_state == HardState(3, None, 9)


def test_a_received_snapshot_restarts_the_log_after_it(fs: MemoryFileSystem) -> None:
    storage = reopen(fs)
    storage.save(ready(entries(1, 5, 1), HardState(1, None, 2)))
    snapshot = Snapshot(40, 3, ABC, b"state@40")
    storage.save(ready(entries(41, 42, 3), HardState(3, None, 40), snapshot))
    storage.close()
    loaded = load(fs)
    assert loaded == PersistedState(HardState(3, None, 40), snapshot, entries(41, 42, 3))


@pytest.mark.parametrize(
    ("log_terms", "expected_entries"),
    [
        # The log ends before the snapshot: it starts afresh after it.
        ({1: 1, 2: 1}, ()),
        # The log holds the snapshot's entry: the entries after it are kept.
        ({**{i: 1 for i in range(1, 5)}, **{i: 2 for i in range(5, 9)}}, entries(7, 8, 2)),
        # The log disagrees on the snapshot's term: it is dropped.
        ({i: 1 for i in range(1, 9)}, ()),
    ],
)
def test_a_crash_between_snapshot_file_and_log_reset_is_reconciled(
    fs: MemoryFileSystem, log_terms: dict[int, int], expected_entries: tuple[Entry, ...]
) -> None:
    storage = reopen(fs)
    written = tuple(entries(i, i, term)[0] for i, term in sorted(log_terms.items()))
    storage.save(ready(written, HardState(2, None, 0)))
    snapshot = Snapshot(6, 2, ABC, b"state@6")
    # The first step of saving a received snapshot, then the power went.
    write_file_atomically(fs, f"{DIR}/snapshot", encode_snapshot(snapshot))
    fs.crash_losing_all_unsynced()
    storage = reopen(fs)
    loaded = storage.load()
    assert loaded is not None and loaded.snapshot == snapshot
    assert loaded.entries == expected_entries
    storage.save(ready(entries(len(expected_entries) + 7, 12, 2)))  # and it takes more


def test_a_local_snapshot_deletes_the_segments_it_covers(fs: MemoryFileSystem) -> None:
    storage = reopen(fs)
    for first in range(1, 200, 10):  # one batch per Ready: several segments
        storage.save(ready(entries(first, first + 9, 1), HardState(1, None, 0)))
    before = len(fs.listdir(f"{DIR}/log"))
    storage.save_snapshot(Snapshot(150, 1, ABC, b"state@150"))
    assert len(fs.listdir(f"{DIR}/log")) < before
    storage.close()
    loaded = load(fs)
    assert loaded is not None
    assert loaded.snapshot == Snapshot(150, 1, ABC, b"state@150")
    assert loaded.entries == entries(151, 200, 1)


@pytest.mark.parametrize("name", ["hardstate", "snapshot"])
def test_a_damaged_state_file_is_reported(fs: MemoryFileSystem, name: str) -> None:
    storage = reopen(fs)
    storage.save(ready(entries(1, 3, 1), HardState(1, "a", 1), Snapshot(0, 0, ABC, b"s")))
    storage.close()
    path = f"{DIR}/{name}"
    data = bytearray(fs.snapshot_bytes(path))
    data[3] ^= 0x40
    write_file_atomically(fs, path, bytes(data))
    with pytest.raises(RaftStorageCorruptError, match=name):
        load(fs)


def test_a_node_survives_power_cuts_on_its_storage(fs: MemoryFileSystem) -> None:
    """A one-node group over storage: what it acknowledged before a cut is there after."""
    config = RaftConfig()
    rng = random.Random(7)
    applied: list[bytes] = []

    def drive(node: RaftNode, storage: RaftStorage) -> None:
        while node.has_ready():
            step = node.ready()
            storage.save(step)
            applied.extend(e.data for e in step.committed_entries
                           if e.kind is EntryKind.NORMAL)
            node.advance(step)

    storage = reopen(fs)
    node = RaftNode("a", Membership.of(["a"]), config, rng, storage.load())
    for round_number in range(3):
        for _ in range(2 * config.election_ticks):
            node.tick()
            drive(node, storage)
        assert node.role is Role.LEADER
        for i in range(5):
            node.propose(b"r%d-%d" % (round_number, i))
            drive(node, storage)
        term = node.term
        fs.crash(rng)
        applied.clear()
        storage = reopen(fs)
        node = RaftNode("a", Membership.of(["a"]), config, rng, storage.load())
        assert node.term == term
        drive(node, storage)
    for _ in range(2 * config.election_ticks):
        node.tick()
        drive(node, storage)
    expected = [b"r%d-%d" % (r, i) for r in range(3) for i in range(5)]
    assert applied == expected  # replayed from the log after the last restart
