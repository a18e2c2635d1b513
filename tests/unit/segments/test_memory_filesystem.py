"""Unit tests for the in-memory, crashable file system used by the simulation tests."""

from __future__ import annotations

import errno
import random

import pytest

from segments.errors import DataDirLockedError
from segments.filesystem import FileSystem, write_file_atomically
from segments.memory_filesystem import MemoryFileSystem

SEEDS = range(200)
DIR = "/data/q1"
LOG = "/data/q1/00000000000000000000.log"


@pytest.fixture
def fs() -> MemoryFileSystem:
    fs = MemoryFileSystem()
    fs.makedirs(DIR)
    return fs


def durable_file(fs: MemoryFileSystem, path: str, data: bytes) -> None:
    """Create `path` with `data`, content and directory entry both synced."""
    handle = fs.open(path)
    handle.append(data)
    handle.sync()
    handle.close()
    fs.sync_dir(path.rsplit("/", 1)[0])


# -- basic operations -------------------------------------------------------------


def test_satisfies_the_filesystem_protocol() -> None:
    fs: FileSystem = MemoryFileSystem()
    fs.makedirs("/d")
    write_file_atomically(fs, "/d/meta", b"v1")
    write_file_atomically(fs, "/d/meta", b"v2")
    assert fs.listdir("/d") == ["meta"]
    handle = fs.open("/d/meta")
    assert handle.read_at(0, 10) == b"v2"


def test_open_creates_an_empty_file(fs: MemoryFileSystem) -> None:
    assert not fs.exists(LOG)
    handle = fs.open(LOG)
    assert fs.exists(LOG)
    assert handle.path == LOG
    assert handle.size() == 0
    assert fs.file_size(LOG) == 0
    assert handle.read_at(0, 10) == b""


def test_append_and_read_at(fs: MemoryFileSystem) -> None:
    handle = fs.open(LOG)
    handle.append(b"hello ")
    handle.append(bytearray(b"world"))
    assert handle.size() == 11
    assert fs.file_size(LOG) == 11
    assert handle.read_at(0, 5) == b"hello"
    assert handle.read_at(6, 100) == b"world"
    assert handle.read_at(11, 5) == b""
    assert handle.read_at(50, 5) == b""
    assert isinstance(handle.read_at(0, 3), bytes)


def test_read_at_rejects_negative_arguments(fs: MemoryFileSystem) -> None:
    handle = fs.open(LOG)
    with pytest.raises(OSError) as caught:
        handle.read_at(-1, 1)
    assert caught.value.errno == errno.EINVAL


def test_reopening_sees_existing_content_and_handles_share_it(fs: MemoryFileSystem) -> None:
    first = fs.open(LOG)
    first.append(b"abc")
    second = fs.open(LOG)
    assert second.size() == 3
    second.append(b"def")
    assert first.read_at(0, 6) == b"abcdef"
    assert fs.snapshot_bytes(LOG) == b"abcdef"


def test_truncate_shrinks_and_grows_with_zeros(fs: MemoryFileSystem) -> None:
    handle = fs.open(LOG)
    handle.append(b"abcdef")
    handle.truncate(2)
    assert handle.size() == 2
    assert fs.snapshot_bytes(LOG) == b"ab"
    handle.append(b"XY")
    assert fs.snapshot_bytes(LOG) == b"abXY"
    handle.truncate(6)
    assert fs.snapshot_bytes(LOG) == b"abXY\x00\x00"
    with pytest.raises(OSError):
        handle.truncate(-1)


def test_closed_handle_refuses_io(fs: MemoryFileSystem) -> None:
    handle = fs.open(LOG)
    handle.close()
    handle.close()  # idempotent
    with pytest.raises(ValueError):
        handle.append(b"x")
    with pytest.raises(ValueError):
        handle.read_at(0, 1)
    with pytest.raises(ValueError):
        handle.sync()
    with pytest.raises(ValueError):
        handle.truncate(0)
    with pytest.raises(ValueError):
        handle.size()


def test_makedirs_is_idempotent_and_creates_parents() -> None:
    fs = MemoryFileSystem()
    fs.makedirs("/a/b/c")
    fs.makedirs("/a/b/c")
    fs.makedirs("/a/b")
    assert fs.exists("/a") and fs.exists("/a/b") and fs.exists("/a/b/c")
    assert fs.listdir("/a") == ["b"]
    assert fs.listdir("/") == ["a"]


def test_makedirs_over_a_file_fails(fs: MemoryFileSystem) -> None:
    fs.open(LOG).close()
    with pytest.raises(FileExistsError):
        fs.makedirs(LOG)


def test_relative_paths_live_under_dot() -> None:
    fs = MemoryFileSystem()
    fs.makedirs("rel/dir")
    fs.open("rel/dir/f").close()
    assert fs.listdir(".") == ["rel"]
    assert fs.listdir("rel/dir") == ["f"]
    assert not fs.exists("/rel")


def test_paths_are_normalised(fs: MemoryFileSystem) -> None:
    fs.open("/data//q1/../q1/./a.log").append(b"x")
    assert fs.exists("/data/q1/a.log")
    assert fs.snapshot_bytes("/data/q1/a.log") == b"x"
    assert fs.listdir("/data/q1/") == ["a.log"]


def test_listdir_is_sorted_and_includes_subdirectories(fs: MemoryFileSystem) -> None:
    for name in ["c.log", "a.log", "b.index"]:
        fs.open(f"{DIR}/{name}").close()
    fs.makedirs(f"{DIR}/sub")
    fs.open(f"{DIR}/sub/deeper").close()
    assert fs.listdir(DIR) == ["a.log", "b.index", "c.log", "sub"]
    assert fs.listdir("/data") == ["q1"]


def test_missing_paths_raise_like_the_os(fs: MemoryFileSystem) -> None:
    with pytest.raises(FileNotFoundError):
        fs.open("/nowhere/file")
    with pytest.raises(FileNotFoundError):
        fs.file_size(LOG)
    with pytest.raises(FileNotFoundError):
        fs.listdir("/nowhere")
    with pytest.raises(FileNotFoundError):
        fs.remove(LOG)
    with pytest.raises(FileNotFoundError):
        fs.rename(LOG, f"{DIR}/other")
    with pytest.raises(FileNotFoundError):
        fs.sync_dir("/nowhere")
    with pytest.raises(FileNotFoundError):
        fs.lock_dir("/nowhere")
    with pytest.raises(FileNotFoundError):
        fs.snapshot_bytes(LOG)
    with pytest.raises(FileNotFoundError):
        fs.durable_bytes(LOG)
    fs.open(LOG).close()
    with pytest.raises(FileNotFoundError):
        fs.rename(LOG, "/nowhere/x")


def test_directories_and_files_are_not_confused(fs: MemoryFileSystem) -> None:
    fs.open(LOG).close()
    with pytest.raises(IsADirectoryError):
        fs.open(DIR)
    with pytest.raises(IsADirectoryError):
        fs.remove(DIR)
    with pytest.raises(IsADirectoryError):
        fs.file_size(DIR)
    with pytest.raises(IsADirectoryError):
        fs.rename(LOG, DIR)
    with pytest.raises(NotADirectoryError):
        fs.listdir(LOG)
    with pytest.raises(NotADirectoryError):
        fs.sync_dir(LOG)


def test_remove(fs: MemoryFileSystem) -> None:
    handle = fs.open(LOG)
    handle.append(b"data")
    fs.remove(LOG)
    assert not fs.exists(LOG)
    assert fs.listdir(DIR) == []
    # POSIX: an open handle keeps the unlinked inode alive.
    assert handle.read_at(0, 4) == b"data"
    assert fs.open(LOG).size() == 0


def test_rename_replaces_destination(fs: MemoryFileSystem) -> None:
    fs.open(f"{DIR}/new").append(b"new")
    old = fs.open(f"{DIR}/cur")
    old.append(b"old")
    fs.rename(f"{DIR}/new", f"{DIR}/cur")
    assert fs.listdir(DIR) == ["cur"]
    assert fs.snapshot_bytes(f"{DIR}/cur") == b"new"
    assert old.read_at(0, 3) == b"old"  # the replaced inode lives on behind its handle


def test_rename_onto_itself_is_a_no_op(fs: MemoryFileSystem) -> None:
    fs.open(LOG).append(b"x")
    fs.rename(LOG, LOG)
    assert fs.snapshot_bytes(LOG) == b"x"


def test_rename_across_directories(fs: MemoryFileSystem) -> None:
    fs.makedirs("/data/q2")
    fs.open(LOG).append(b"x")
    fs.rename(LOG, "/data/q2/moved")
    assert fs.listdir(DIR) == []
    assert fs.listdir("/data/q2") == ["moved"]
    assert fs.snapshot_bytes("/data/q2/moved") == b"x"


# -- locks ----------------------------------------------------------------------


def test_lock_refuses_a_second_owner_until_released(fs: MemoryFileSystem) -> None:
    lock = fs.lock_dir(DIR)
    with pytest.raises(DataDirLockedError) as caught:
        fs.lock_dir(DIR)
    assert caught.value.path == DIR
    with pytest.raises(DataDirLockedError):
        fs.lock_dir("/data/q1/")  # the same directory spelled differently
    fs.lock_dir("/data").release()  # other directories are independent
    lock.release()
    lock.release()  # idempotent
    fs.lock_dir(DIR).release()


def test_lock_leaves_a_lock_file_like_the_real_file_system(fs: MemoryFileSystem) -> None:
    fs.lock_dir(DIR)
    assert fs.listdir(DIR) == [".lock"]


def test_crash_releases_locks_and_a_stale_release_does_not_free_the_new_lock(
    fs: MemoryFileSystem,
) -> None:
    stale = fs.lock_dir(DIR)
    fs.crash_losing_all_unsynced()
    fresh = fs.lock_dir(DIR)
    stale.release()
    with pytest.raises(DataDirLockedError):
        fs.lock_dir(DIR)
    fresh.release()
    fs.lock_dir(DIR)


# -- durability: losing everything unsynced --------------------------------------


def test_crash_losing_all_unsynced_keeps_exactly_synced_data(fs: MemoryFileSystem) -> None:
    handle = fs.open(LOG)
    fs.sync_dir(DIR)
    handle.append(b"synced")
    handle.sync()
    handle.append(b"-lost")
    assert fs.durable_bytes(LOG) == b"synced"
    assert fs.snapshot_bytes(LOG) == b"synced-lost"
    fs.crash_losing_all_unsynced()
    assert fs.snapshot_bytes(LOG) == b"synced"
    assert fs.durable_bytes(LOG) == b"synced"
    assert fs.open(LOG).size() == 6


def test_unsynced_truncation_is_undone_and_synced_truncation_kept(fs: MemoryFileSystem) -> None:
    durable_file(fs, LOG, b"abcdef")
    handle = fs.open(LOG)
    handle.truncate(3)
    fs.crash_losing_all_unsynced()
    assert fs.snapshot_bytes(LOG) == b"abcdef"
    handle = fs.open(LOG)
    handle.truncate(3)
    handle.append(b"XYZ")
    handle.sync()
    fs.crash_losing_all_unsynced()
    assert fs.snapshot_bytes(LOG) == b"abcXYZ"


def test_file_in_unsynced_directory_vanishes_even_with_synced_content(
    fs: MemoryFileSystem,
) -> None:
    handle = fs.open(LOG)
    handle.append(b"data")
    handle.sync()
    fs.crash_losing_all_unsynced()
    assert not fs.exists(LOG)
    assert fs.listdir(DIR) == []


def test_file_in_synced_directory_survives_with_only_synced_content(
    fs: MemoryFileSystem,
) -> None:
    fs.open(LOG).append(b"never synced")
    fs.sync_dir(DIR)
    fs.crash_losing_all_unsynced()
    assert fs.exists(LOG)
    assert fs.snapshot_bytes(LOG) == b""


def test_unsynced_remove_is_undone_and_synced_remove_kept(fs: MemoryFileSystem) -> None:
    durable_file(fs, LOG, b"keep")
    fs.remove(LOG)
    fs.crash_losing_all_unsynced()
    assert fs.snapshot_bytes(LOG) == b"keep"
    fs.remove(LOG)
    fs.sync_dir(DIR)
    fs.crash_losing_all_unsynced()
    assert not fs.exists(LOG)


def test_crash_closes_every_handle(fs: MemoryFileSystem) -> None:
    durable_file(fs, LOG, b"x")
    handle = fs.open(LOG)
    fs.crash_losing_all_unsynced()
    with pytest.raises(ValueError):
        handle.append(b"y")
    with pytest.raises(ValueError):
        handle.read_at(0, 1)
    assert fs.open(LOG).read_at(0, 1) == b"x"


def test_directories_survive_a_crash() -> None:
    fs = MemoryFileSystem()
    fs.makedirs("/a/b")
    fs.crash_losing_all_unsynced()
    assert fs.listdir("/a") == ["b"]


def test_sync_dir_only_commits_that_directory(fs: MemoryFileSystem) -> None:
    fs.makedirs("/data/q2")
    fs.open(f"{DIR}/a").close()
    fs.open("/data/q2/b").close()
    fs.sync_dir(DIR)
    fs.crash_losing_all_unsynced()
    assert fs.listdir(DIR) == ["a"]
    assert fs.listdir("/data/q2") == []


def test_remove_then_recreate_replays_in_order(fs: MemoryFileSystem) -> None:
    durable_file(fs, LOG, b"first")
    fs.remove(LOG)
    second = fs.open(LOG)
    second.append(b"second")
    second.sync()
    fs.sync_dir(DIR)
    fs.crash_losing_all_unsynced()
    assert fs.snapshot_bytes(LOG) == b"second"


# -- durability: random crashes ---------------------------------------------------


def test_random_crash_keeps_durable_data_plus_a_prefix_of_unsynced_appends() -> None:
    durable, unsynced = b"D" * 100, b"".join(bytes([i]) * 7 for i in range(1, 20))
    lengths = set()
    for seed in SEEDS:
        fs = MemoryFileSystem()
        fs.makedirs(DIR)
        durable_file(fs, LOG, durable)
        handle = fs.open(LOG)
        for start in range(0, len(unsynced), 7):
            handle.append(unsynced[start : start + 7])
        fs.crash(random.Random(seed))
        content = fs.snapshot_bytes(LOG)
        kept = len(content) - len(durable)
        assert content == durable + unsynced[:kept], f"seed {seed}"
        assert fs.durable_bytes(LOG) == content  # everything left is durable
        lengths.add(kept)
    assert 0 in lengths and len(unsynced) in lengths
    assert any(kept % 7 for kept in lengths), "no append was ever torn"
    assert any(kept % 7 == 0 and 0 < kept < len(unsynced) for kept in lengths)


def test_random_crash_with_pending_truncation_yields_an_ordered_prefix() -> None:
    outcomes = set()
    for seed in SEEDS:
        fs = MemoryFileSystem()
        fs.makedirs(DIR)
        durable_file(fs, LOG, b"abcdef")
        handle = fs.open(LOG)
        handle.truncate(2)
        handle.append(b"XYZ")
        fs.crash(random.Random(seed))
        outcomes.add(fs.snapshot_bytes(LOG))
    assert outcomes == {b"abcdef", b"ab", b"abX", b"abXY", b"abXYZ"}


def test_random_crash_may_drop_an_unsynced_create_but_keeps_synced_ones() -> None:
    survived = 0
    for seed in SEEDS:
        fs = MemoryFileSystem()
        fs.makedirs(DIR)
        durable_file(fs, f"{DIR}/synced", b"s")
        fs.open(f"{DIR}/unsynced").close()
        fs.crash(random.Random(seed))
        assert fs.snapshot_bytes(f"{DIR}/synced") == b"s"
        survived += fs.exists(f"{DIR}/unsynced")
    assert 0 < survived < len(SEEDS)


def test_namespace_ops_survive_as_a_prefix() -> None:
    for seed in SEEDS:
        fs = MemoryFileSystem()
        fs.makedirs(DIR)
        names = [f"{i:02d}" for i in range(8)]
        for name in names:
            fs.open(f"{DIR}/{name}").close()
        fs.crash(random.Random(seed))
        listed = fs.listdir(DIR)
        assert listed == names[: len(listed)], f"seed {seed}"


def test_random_crash_rename_is_atomic() -> None:
    outcomes = set()
    for seed in SEEDS:
        fs = MemoryFileSystem()
        fs.makedirs(DIR)
        durable_file(fs, f"{DIR}/meta", b"old" * 10)
        temporary = fs.open(f"{DIR}/meta.tmp")
        temporary.append(b"new" * 10)
        temporary.sync()
        fs.rename(f"{DIR}/meta.tmp", f"{DIR}/meta")
        fs.crash(random.Random(seed))
        content = fs.snapshot_bytes(f"{DIR}/meta")
        assert content in (b"old" * 10, b"new" * 10), f"seed {seed}"
        if content == b"new" * 10:
            assert not fs.exists(f"{DIR}/meta.tmp")
        outcomes.add(content)
    assert len(outcomes) == 2


def test_write_file_atomically_is_durable_after_any_crash() -> None:
    for seed in SEEDS[:50]:
        fs = MemoryFileSystem()
        fs.makedirs(DIR)
        write_file_atomically(fs, f"{DIR}/meta", b"v1")
        write_file_atomically(fs, f"{DIR}/meta", b"v2")
        fs.crash(random.Random(seed))
        assert fs.listdir(DIR) == ["meta"]
        assert fs.snapshot_bytes(f"{DIR}/meta") == b"v2"


def test_cross_directory_rename_never_duplicates_or_loses_the_file() -> None:
    places = set()
    for seed in SEEDS:
        fs = MemoryFileSystem()
        fs.makedirs("/a")
        fs.makedirs("/b")
        durable_file(fs, "/a/f", b"payload")
        fs.open("/b/other").close()
        fs.rename("/a/f", "/b/f")
        fs.open("/a/later").close()
        fs.crash(random.Random(seed))
        here = (fs.exists("/a/f"), fs.exists("/b/f"))
        assert here in ((True, False), (False, True)), f"seed {seed}"
        path = "/a/f" if here[0] else "/b/f"
        assert fs.snapshot_bytes(path) == b"payload"
        if here[1]:
            assert fs.exists("/b/other")  # everything before the rename in /b is kept too
        places.add(here)
    assert len(places) == 2


@pytest.mark.parametrize("synced", ["/a", "/b"])
def test_syncing_either_directory_commits_a_cross_directory_rename(synced: str) -> None:
    fs = MemoryFileSystem()
    fs.makedirs("/a")
    fs.makedirs("/b")
    handle = fs.open("/a/f")  # the create is unsynced: the rename commits it too
    handle.append(b"x")
    handle.sync()
    fs.rename("/a/f", "/b/f")
    fs.sync_dir(synced)
    fs.crash_losing_all_unsynced()
    assert fs.listdir("/a") == []
    assert fs.listdir("/b") == ["f"]
    assert fs.snapshot_bytes("/b/f") == b"x"


def test_random_crash_is_deterministic_per_seed() -> None:
    def run(seed: int) -> dict[str, bytes]:
        fs = MemoryFileSystem()
        for directory in ("/x", "/y"):
            fs.makedirs(directory)
            for i in range(5):
                handle = fs.open(f"{directory}/{i}")
                handle.append(bytes(range(50)))
                if i % 2:
                    handle.sync()
        fs.sync_dir("/x")
        fs.crash(random.Random(seed))
        return {
            f"{d}/{n}": fs.snapshot_bytes(f"{d}/{n}") for d in ("/x", "/y") for n in fs.listdir(d)
        }

    results = [run(seed) for seed in range(20)]
    assert results == [run(seed) for seed in range(20)]
    assert len({tuple(sorted(result.items())) for result in results}) > 1


def test_state_after_a_crash_is_fully_durable() -> None:
    fs = MemoryFileSystem()
    fs.makedirs(DIR)
    fs.open(LOG).append(b"abc" * 50)
    fs.crash(random.Random(3))
    before = {name: fs.snapshot_bytes(f"{DIR}/{name}") for name in fs.listdir(DIR)}
    fs.crash_losing_all_unsynced()
    assert {name: fs.snapshot_bytes(f"{DIR}/{name}") for name in fs.listdir(DIR)} == before


# -- fault injection --------------------------------------------------------------


def test_enospc_writes_what_fits_then_resumes_when_space_returns() -> None:
    fs = MemoryFileSystem(capacity_bytes=10)
    fs.makedirs(DIR)
    handle = fs.open(LOG)
    handle.append(b"123456")
    with pytest.raises(OSError) as caught:
        handle.append(b"abcdef")
    assert caught.value.errno == errno.ENOSPC
    assert fs.snapshot_bytes(LOG) == b"123456abcd"
    assert fs.used_bytes == 10
    with pytest.raises(OSError):
        handle.append(b"z")
    assert handle.size() == 10
    fs.set_capacity(None)
    handle.append(b"ef")
    assert fs.snapshot_bytes(LOG) == b"123456abcdef"


def test_capacity_is_shared_by_all_files_and_freed_by_remove_and_truncate() -> None:
    fs = MemoryFileSystem(capacity_bytes=8)
    fs.makedirs(DIR)
    fs.open(f"{DIR}/a").append(b"aaaa")
    other = fs.open(f"{DIR}/b")
    other.append(b"bbbb")
    with pytest.raises(OSError):
        other.append(b"b")
    fs.remove(f"{DIR}/a")
    other.append(b"bbbb")
    assert fs.used_bytes == 8
    other.truncate(2)
    with pytest.raises(OSError):
        other.truncate(20)  # growing allocates too
    other.append(b"cccccc")
    assert fs.snapshot_bytes(f"{DIR}/b") == b"bbcccccc"


def test_capacity_accounting_follows_rename_and_crash() -> None:
    fs = MemoryFileSystem(capacity_bytes=100)
    fs.makedirs(DIR)
    durable_file(fs, f"{DIR}/a", b"x" * 40)
    fs.open(f"{DIR}/b").append(b"y" * 30)
    fs.rename(f"{DIR}/b", f"{DIR}/a")
    assert fs.used_bytes == 30
    fs.crash_losing_all_unsynced()
    assert fs.used_bytes == 40


def test_fail_sync_raises_eio_and_makes_nothing_durable(fs: MemoryFileSystem) -> None:
    handle = fs.open(LOG)
    handle.append(b"data")
    fs.fail_sync = True
    with pytest.raises(OSError) as caught:
        handle.sync()
    assert caught.value.errno == errno.EIO
    with pytest.raises(OSError) as caught:
        fs.sync_dir(DIR)
    assert caught.value.errno == errno.EIO
    fs.crash_losing_all_unsynced()
    assert not fs.exists(LOG)
    fs.fail_sync = False
    durable_file(fs, LOG, b"ok")
    fs.crash_losing_all_unsynced()
    assert fs.snapshot_bytes(LOG) == b"ok"


def test_many_small_appends_stay_fast() -> None:
    fs = MemoryFileSystem()
    fs.makedirs(DIR)
    handle = fs.open(LOG)
    chunk = b"r" * 512
    for i in range(16_384):  # 8 MiB; quadratic copying would take minutes
        handle.append(chunk)
        if i % 64 == 0:
            handle.sync()
    assert handle.size() == 8 * 1024 * 1024
    assert handle.read_at(handle.size() - 3, 10) == b"rrr"
