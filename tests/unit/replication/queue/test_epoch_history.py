"""EpochHistory: ordering rules, the leader-epoch lookups, and crash-atomic files."""

from __future__ import annotations

import json
import random

import pytest

from replication.queue.epoch_history import (
    FILE_NAME,
    MAX_ENTRIES,
    EpochHistory,
    EpochHistoryError,
    EpochStart,
)
from segments.memory_filesystem import MemoryFileSystem

from .faults import CountingFileSystem, PowerCut

DIR = "/data/q"
PATH = f"{DIR}/{FILE_NAME}"


def history(*pairs: tuple[int, int]) -> EpochHistory:
    return EpochHistory(EpochStart(epoch, start) for epoch, start in pairs)


def pairs_of(h: EpochHistory) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in h.entries]


# ---------------------------------------------------------------- begin


def test_an_empty_history_knows_no_epoch() -> None:
    h = EpochHistory()
    assert h.entries == ()
    assert h.latest_epoch == 0
    assert h.epoch_at(0) == 0
    assert h.end_offset_of(7, 42) == (0, 42)


def test_begin_appends_rising_epochs() -> None:
    h = EpochHistory()
    assert h.begin(1, 0)
    assert h.begin(3, 10)
    assert h.begin(4, 10)  # an epoch whose leader wrote nothing before the next one
    assert pairs_of(h) == [(1, 0), (3, 10), (4, 10)]
    assert h.latest_epoch == 4


def test_beginning_the_latest_epoch_again_changes_nothing() -> None:
    h = history((1, 0), (2, 5))
    assert not h.begin(2, 5)
    assert pairs_of(h) == [(1, 0), (2, 5)]


@pytest.mark.parametrize(("epoch", "start"), [(2, 6), (2, 4), (1, 9), (0, 9)])
def test_an_epoch_that_does_not_rise_is_refused(epoch: int, start: int) -> None:
    h = history((1, 0), (2, 5))
    with pytest.raises(EpochHistoryError, match="does not follow"):
        h.begin(epoch, start)
    assert pairs_of(h) == [(1, 0), (2, 5)]


def test_an_epoch_starting_before_the_last_one_is_refused() -> None:
    h = history((1, 0), (2, 5))
    with pytest.raises(EpochHistoryError, match="before epoch 2"):
        h.begin(3, 4)
    assert pairs_of(h) == [(1, 0), (2, 5)]


def test_the_constructor_checks_the_order_too() -> None:
    with pytest.raises(EpochHistoryError):
        history((2, 0), (1, 5))
    with pytest.raises(EpochHistoryError):
        history((1, 5), (2, 0))


def test_the_history_keeps_at_most_max_entries_dropping_the_oldest() -> None:
    h = EpochHistory()
    for epoch in range(1, MAX_ENTRIES + 3):
        h.begin(epoch, epoch * 10)
    assert len(h.entries) == MAX_ENTRIES
    assert h.entries[0] == EpochStart(3, 30)
    assert h.latest_epoch == MAX_ENTRIES + 2


# ---------------------------------------------------------------- lookups

GAPPY = ((2, 5), (4, 10), (7, 20))  # epochs 1, 3, 5 and 6 wrote nothing here


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (0, (0, 5)),  # older than everything: itself, ending at the first start
        (1, (1, 5)),
        (2, (2, 10)),  # exact, ends where the next begins
        (3, (2, 10)),  # in the middle: the largest epoch <= 3 is 2
        (4, (4, 20)),
        (6, (4, 20)),
        (7, (7, 30)),  # the latest ends at the log's end
        (99, (7, 30)),
    ],
)
def test_end_offset_of(epoch: int, expected: tuple[int, int]) -> None:
    assert history(*GAPPY).end_offset_of(epoch, 30) == expected


def test_end_offset_of_an_empty_epoch_is_its_start() -> None:
    h = history((1, 0), (2, 8), (3, 8))
    assert h.end_offset_of(2, 20) == (2, 8)
    assert h.end_offset_of(1, 20) == (1, 8)
    assert h.end_offset_of(3, 20) == (3, 20)


@pytest.mark.parametrize(
    ("offset", "expected"),
    [(0, []), (5, []), (6, [(2, 5)]), (10, [(2, 5)]), (11, [(2, 5), (4, 10)]),
     (20, [(2, 5), (4, 10)]), (21, list(GAPPY)), (1000, list(GAPPY))],
)
def test_truncate_from_forgets_epochs_starting_at_or_after_the_cut(
        offset: int, expected: list[tuple[int, int]]) -> None:
    h = history(*GAPPY)
    h.truncate_from(offset)
    assert pairs_of(h) == expected


@pytest.mark.parametrize(
    ("log_start", "expected"),
    [(0, list(GAPPY)), (5, list(GAPPY)), (9, list(GAPPY)), (10, [(4, 10), (7, 20)]),
     (19, [(4, 10), (7, 20)]), (20, [(7, 20)]), (10_000, [(7, 20)])],
)
def test_forget_below_keeps_the_epoch_covering_the_log_start(
        log_start: int, expected: list[tuple[int, int]]) -> None:
    h = history(*GAPPY)
    h.forget_below(log_start)
    assert pairs_of(h) == expected
    if log_start >= 5:
        # Lookups at and above the log start are unchanged.
        assert h.epoch_at(log_start) == history(*GAPPY).epoch_at(log_start)


def test_forget_below_on_an_empty_history_is_a_no_op() -> None:
    h = EpochHistory()
    h.forget_below(100)
    assert h.entries == ()


@pytest.mark.parametrize(
    ("offset", "expected"),
    [(0, 0), (4, 0), (5, 2), (9, 2), (10, 4), (19, 4), (20, 7), (10**12, 7)],
)
def test_epoch_at(offset: int, expected: int) -> None:
    assert history(*GAPPY).epoch_at(offset) == expected


def test_epoch_at_skips_empty_epochs() -> None:
    assert history((1, 0), (2, 8), (3, 8)).epoch_at(8) == 3


# ---------------------------------------------------------------- JSON


def test_json_round_trips() -> None:
    h = history(*GAPPY)
    document = json.loads(json.dumps(h.to_json()))
    assert document == [[2, 5], [4, 10], [7, 20]]
    assert pairs_of(EpochHistory.from_json(document)) == list(GAPPY)
    assert EpochHistory.from_json([]).entries == ()


@pytest.mark.parametrize(
    "document",
    [
        None,
        {"1": 0},
        "[[1, 0]]",
        7,
        [1, 0],
        [[1]],
        [[1, 0, 0]],
        [(1, 0)],  # JSON has no tuples: only lists come out of json.loads
        [[1, -1]],
        [[-1, 0]],
        [[1.0, 0]],
        [["1", 0]],
        [[1, None]],
        [[True, 0]],
        [[2, 0], [1, 5]],
        [[1, 5], [2, 0]],
    ],
)
def test_bad_documents_are_refused(document: object) -> None:
    with pytest.raises(EpochHistoryError):
        EpochHistory.from_json(document)


# ---------------------------------------------------------------- files


@pytest.fixture
def fs() -> MemoryFileSystem:
    memory = MemoryFileSystem()
    memory.makedirs(DIR)
    return memory


def test_loading_a_missing_file_gives_an_empty_history(fs: MemoryFileSystem) -> None:
    assert EpochHistory.load(fs, DIR).entries == ()


def test_save_then_load_round_trips(fs: MemoryFileSystem) -> None:
    history(*GAPPY).save(fs, DIR)
    assert pairs_of(EpochHistory.load(fs, DIR)) == list(GAPPY)
    history((9, 40)).save(fs, DIR)
    assert pairs_of(EpochHistory.load(fs, DIR)) == [(9, 40)]
    assert not fs.exists(PATH + ".tmp")


def test_a_saved_history_survives_a_power_loss(fs: MemoryFileSystem) -> None:
    history(*GAPPY).save(fs, DIR)
    fs.crash_losing_all_unsynced()
    assert pairs_of(EpochHistory.load(fs, DIR)) == list(GAPPY)


def test_a_leftover_temporary_file_is_replaced(fs: MemoryFileSystem) -> None:
    handle = fs.open(PATH + ".tmp")
    handle.append(b"[[1,0],[2,")  # an interrupted save
    handle.close()
    history((3, 7)).save(fs, DIR)
    assert pairs_of(EpochHistory.load(fs, DIR)) == [(3, 7)]
    assert not fs.exists(PATH + ".tmp")


@pytest.mark.parametrize("content", [b"", b"[[1,0],[2,", b"\xff\xfe\x00", b"{}", b"[[2,0],[1,1]]"])
def test_a_damaged_file_raises_a_clear_error(fs: MemoryFileSystem, content: bytes) -> None:
    handle = fs.open(PATH)
    handle.append(content)
    handle.close()
    with pytest.raises(EpochHistoryError, match=FILE_NAME):
        EpochHistory.load(fs, DIR)


OLD = ((1, 0), (2, 5))
NEW = ((1, 0), (2, 5), (3, 9), (4, 12))


def operations_of_a_save(leftover: bool) -> int:
    fs = MemoryFileSystem()
    fs.makedirs(DIR)
    if leftover:
        fs.open(PATH + ".tmp").close()
    counting = CountingFileSystem(fs, budget=-1)
    history(*NEW).save(counting, DIR)
    return counting.steps


@pytest.mark.parametrize("leftover", [False, True])
@pytest.mark.parametrize("had_old_file", [False, True])
def test_a_power_cut_during_save_leaves_the_old_or_the_new_file_never_a_torn_one(
        leftover: bool, had_old_file: bool) -> None:
    total = operations_of_a_save(leftover)
    assert total >= 5  # create, append, sync, rename, sync_dir
    outcomes: set[tuple[tuple[int, int], ...]] = set()
    for budget in range(total + 1):
        for seed in range(12):
            fs = MemoryFileSystem()
            fs.makedirs(DIR)
            if had_old_file:
                history(*OLD).save(fs, DIR)
            if leftover:
                fs.open(PATH + ".tmp").close()
            counting = CountingFileSystem(fs, budget)
            try:
                history(*NEW).save(counting, DIR)
            except PowerCut:
                pass
            else:
                assert budget == total
            fs.crash(random.Random(seed))
            loaded = tuple(pairs_of(EpochHistory.load(fs, DIR)))
            if budget == total:
                assert loaded == NEW, "a save that returned must survive"
            assert loaded in (NEW, OLD if had_old_file else ())
            outcomes.add(loaded)
            # The next save works whatever the crash left behind.
            history(*NEW, (5, 20)).save(fs, DIR)
            assert pairs_of(EpochHistory.load(fs, DIR)) == [*NEW, (5, 20)]
    assert outcomes == {NEW, OLD if had_old_file else ()}
