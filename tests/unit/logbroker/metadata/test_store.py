"""MetadataStore: persistence, snapshots, bootstrap, crashes and I/O errors."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from logbroker.metadata import (
    AddVhost,
    Bind,
    Command,
    CommitGroupOffsets,
    DeclareExchange,
    DeclareQueue,
    DeleteConsumerGroup,
    DeleteExchange,
    DeletePolicy,
    DeleteQueue,
    MetadataCorruptError,
    MetadataError,
    MetadataState,
    MetadataStore,
    MetadataStoreConfig,
    MetadataStoreFailedError,
    PutPolicy,
    PutUser,
    SetPermissions,
    Unbind,
    bootstrap_commands,
)
from segments.errors import StorageError
from segments.filesystem import FileSystem, RealFileSystem
from segments.log import LogConfig
from segments.memory_filesystem import MemoryFileSystem
from tests.unit.logbroker.metadata.helpers import GUEST_HASH

BOOT = bootstrap_commands(GUEST_HASH)
DATA = "/data"


def config(snapshot_every: int = 1000, segment_bytes: int = 8 << 20) -> MetadataStoreConfig:
    return MetadataStoreConfig(snapshot_every, log=LogConfig(segment_bytes_max=segment_bytes))


def open_store(fs: FileSystem, cfg: MetadataStoreConfig | None = None,
               data_dir: str = DATA) -> MetadataStore:  # fmt: skip
    return MetadataStore.open(fs, data_dir, BOOT, cfg or config(), clock=lambda: 1000)


def reference() -> MetadataState:
    return MetadataState.bootstrap(GUEST_HASH)


def random_command(rng: random.Random) -> Command:
    vhost = rng.choice(["/", "/", "/", "v"])
    queue = rng.choice(["q1", "q2", "q3"])
    exchange = rng.choice(["x1", "x2", "x3"])
    makers: list[Callable[[], Command]] = [
        lambda: AddVhost("v"),
        lambda: DeclareQueue(vhost, queue, rng.random() < 0.5,
                             rng.choice([None, None, "c1"]),
                             arguments={"x-max-length": rng.randint(0, 3), "b": b"\x00"}),
        lambda: DeleteQueue(vhost, queue),
        lambda: DeclareExchange(vhost, exchange, rng.choice(["direct", "fanout"]),
                                auto_delete=rng.random() < 0.3),
        lambda: DeleteExchange(vhost, exchange, if_unused=rng.random() < 0.5),
        lambda: Bind(vhost, exchange, "queue", queue, rng.choice(["a", "b"])),
        lambda: Bind(vhost, exchange, "exchange", rng.choice(["x1", "x2", "x3"])),
        lambda: Unbind(vhost, exchange, "queue", queue, rng.choice(["a", "b"])),
        lambda: PutPolicy(vhost, rng.choice(["p1", "p2"]), rng.choice(["^q", "x"]), "all",
                          rng.randint(0, 3), {"message-ttl": rng.randint(0, 9)}),
        lambda: DeletePolicy(vhost, rng.choice(["p1", "p2"])),
        lambda: PutUser(rng.choice(["bob", "eve"]), "hash", tags=("monitoring",)),
        lambda: SetPermissions("guest", vhost, ".*", ".*", ".*"),
    ]  # fmt: skip
    return rng.choice(makers)()


def apply_both(store: MetadataStore, model: MetadataState, command: Command) -> bool:
    """Apply to the store and the in-memory model; they must agree. True if applied."""
    try:
        applied = store.apply(command)
    except MetadataError as error:
        with pytest.raises(MetadataError) as caught:
            model.apply(command)
        assert caught.value.reply_text == error.reply_text
        return False
    assert model.apply(command) == applied
    return True


# -- persistence --------------------------------------------------------------


def test_brand_new_store_is_bootstrapped_once() -> None:
    fs = MemoryFileSystem()
    store = open_store(fs)
    assert store.next_offset == len(BOOT)
    assert store.state.snapshot() == reference().snapshot()
    store.close()
    store = open_store(fs)
    assert store.next_offset == len(BOOT)
    assert store.state.user("guest") is not None
    store.close()


def test_without_bootstrap_the_store_starts_empty() -> None:
    store = MetadataStore.open(MemoryFileSystem(), DATA)
    assert store.state.vhosts() == () and store.next_offset == 0
    store.close()


def test_commands_survive_a_reopen() -> None:
    fs = MemoryFileSystem()
    store, model = open_store(fs), reference()
    rng = random.Random(1)
    for _ in range(60):
        apply_both(store, model, random_command(rng))
    offset = store.next_offset
    store.close()
    reopened = open_store(fs)
    assert reopened.state.snapshot() == model.snapshot()
    assert reopened.next_offset == offset
    reopened.close()


def test_snapshot_then_more_commands_then_reopen() -> None:
    fs = MemoryFileSystem()
    store, model = open_store(fs, config(snapshot_every=5, segment_bytes=400)), reference()
    rng = random.Random(2)
    for _ in range(80):
        apply_both(store, model, random_command(rng))
    store.close()
    assert fs.exists(f"{DATA}/metadata/snapshot.json")
    document = json.loads(fs.snapshot_bytes(f"{DATA}/metadata/snapshot.json"))
    snapshot_offset = document["applied_offset"]
    assert snapshot_offset > 0
    segments = [name for name in fs.listdir(f"{DATA}/metadata/log") if name.endswith(".log")]
    assert min(int(name.split(".")[0]) for name in segments) == snapshot_offset
    reopened = open_store(fs, config(snapshot_every=5, segment_bytes=400))
    assert reopened.state.snapshot() == model.snapshot()
    for _ in range(7):
        apply_both(reopened, model, random_command(rng))
    reopened.close()
    again = open_store(fs)
    assert again.state.snapshot() == model.snapshot()
    again.close()


def test_refused_commands_are_not_logged() -> None:
    store = open_store(MemoryFileSystem())
    offset = store.next_offset
    with pytest.raises(MetadataError):
        store.apply(DeclareQueue("/", "amq.nope"))
    with pytest.raises(MetadataError):
        store.apply(DeleteExchange("/", "amq.direct"))
    assert store.next_offset == offset
    store.apply(DeclareQueue("/", "q"))
    assert store.apply(DeclareQueue("/", "q")).events == ()
    assert store.next_offset == offset + 2  # an equivalent redeclare is still a command
    store.close()


def test_command_size_is_bounded() -> None:
    store = open_store(MemoryFileSystem(), MetadataStoreConfig(max_command_bytes=1000))
    offset = store.next_offset
    with pytest.raises(MetadataError) as caught:
        store.apply(DeclareQueue("/", "q", arguments={"x-blob": "a" * 2000}))
    assert caught.value.reply_code == 406
    assert "too large" in caught.value.text
    assert store.next_offset == offset and store.state.queue("/", "q") is None
    store.close()


def test_real_filesystem(tmp_path: Path) -> None:
    fs = RealFileSystem()
    store = open_store(fs, config(snapshot_every=3), str(tmp_path))
    for name in ("a", "b", "c", "d"):
        store.apply(DeclareQueue("/", name, durable=True))
    store.close()
    assert (tmp_path / "metadata" / "snapshot.json").exists()
    reopened = open_store(fs, config(snapshot_every=3), str(tmp_path))
    assert [q.name for q in reopened.state.queues("/")] == ["a", "b", "c", "d"]
    reopened.close()


def test_corrupt_snapshot_is_reported() -> None:
    fs = MemoryFileSystem()
    store = open_store(fs, config(snapshot_every=1))
    store.apply(DeclareQueue("/", "q"))
    store.close()
    path = f"{DATA}/metadata/snapshot.json"
    document = json.loads(fs.snapshot_bytes(path))
    document["state"]["users"] = []
    fs.remove(path)
    handle = fs.open(path)
    handle.append(json.dumps(document).encode())
    handle.close()
    with pytest.raises(MetadataCorruptError, match="checksum"):
        open_store(fs)


# -- crashes --------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(50))
def test_every_acknowledged_command_survives_a_crash(seed: int) -> None:
    rng = random.Random(seed)
    fs = MemoryFileSystem()
    cfg = config(rng.choice([1, 2, 3, 7, 1000]), segment_bytes=rng.choice([300, 4096]))
    store, model = open_store(fs, cfg), reference()
    acknowledged = len(BOOT)
    for _ in range(4):
        for _ in range(rng.randint(0, 15)):
            acknowledged += apply_both(store, model, random_command(rng))
        fs.crash(rng)  # right after the last apply returned
        store = open_store(fs, cfg)
        assert store.state.snapshot() == model.snapshot()
        assert store.next_offset == acknowledged


@pytest.mark.parametrize("seed", range(30))
def test_a_failed_fsync_stops_the_store_and_reopening_tells(seed: int) -> None:
    rng = random.Random(seed)
    fs = MemoryFileSystem()
    cfg = config(snapshot_every=rng.choice([2, 1000]), segment_bytes=300)
    store, model = open_store(fs, cfg), reference()
    for _ in range(rng.randint(0, 10)):
        apply_both(store, model, random_command(rng))
    command = DeclareQueue("/", "in-flight", durable=True)
    fs.fail_sync = True
    with pytest.raises(OSError):
        store.apply(command)
    fs.fail_sync = False
    with pytest.raises(MetadataStoreFailedError):
        store.apply(DeclareQueue("/", "after"))
    assert store.state.queue("/", "in-flight") is None  # not applied, not acknowledged
    before = model.snapshot()
    model.apply(command)
    fs.crash(rng)
    store = open_store(fs, cfg)
    assert store.state.snapshot() in (before, model.snapshot())


def test_a_full_disk_stops_the_store_without_losing_anything() -> None:
    fs = MemoryFileSystem()
    store, model = open_store(fs), reference()
    store.apply(DeclareQueue("/", "q"))
    model.apply(DeclareQueue("/", "q"))
    fs.set_capacity(fs.used_bytes + 10)
    with pytest.raises((OSError, StorageError)):
        store.apply(DeclareQueue("/", "big", arguments={"x-pad": "p" * 100}))
    with pytest.raises(MetadataStoreFailedError):
        store.apply(DeclareQueue("/", "next"))
    fs.set_capacity(None)
    fs.crash_losing_all_unsynced()
    assert open_store(fs).state.snapshot() == model.snapshot()


def test_consumer_groups_survive_a_reopen_from_the_log_and_from_a_snapshot() -> None:
    for snapshot_every in (1000, 2):
        fs = MemoryFileSystem()
        store = open_store(fs, config(snapshot_every=snapshot_every))
        store.apply(DeclareQueue("/", "q1"))
        store.apply(CommitGroupOffsets("/", "spark", {"q1": 42}))
        store.apply(CommitGroupOffsets("/", "other", {"q1": 1}))
        store.apply(DeleteConsumerGroup("/", "other"))
        store.close()
        reopened = open_store(fs, config(snapshot_every=snapshot_every))
        group = reopened.state.consumer_group("/", "spark")
        assert group is not None and dict(group.offsets) == {"q1": 42}
        assert reopened.state.consumer_group("/", "other") is None
        reopened.close()
