"""RaftLog: the consistency check, conflict truncation, stability, compaction."""

import pytest

from replication.raft import Entry, EntryKind, InvariantError
from replication.raft.log_store import RaftLog


def entries(first: int, *terms: int) -> list[Entry]:
    return [Entry(term, first + i, EntryKind.NORMAL, b"%d/%d" % (first + i, term))
            for i, term in enumerate(terms)]


def log_with(*terms: int, commit: int = 0) -> RaftLog:
    return RaftLog(0, 0, entries(1, *terms), commit_index=commit)


def test_positions_and_terms() -> None:
    log = RaftLog(4, 2, entries(5, 2, 3, 3))
    assert (log.first_index, log.last_index, log.last_term) == (5, 7, 3)
    assert [log.term_at(i) for i in (3, 4, 5, 7, 8)] == [None, 2, 2, 3, None]
    assert log.slice(5, 8, max_count=2) == entries(5, 2, 3)
    assert log.slice(6, 100) == entries(6, 3, 3)
    with pytest.raises(IndexError, match="compacted"):
        log.slice(4, 6)


def test_up_to_date_compares_last_term_then_length() -> None:
    log = log_with(1, 2, 2)
    assert log.is_up_to_date(3, 2)
    assert log.is_up_to_date(1, 3)  # a later term wins even when shorter
    assert not log.is_up_to_date(2, 2)
    assert not log.is_up_to_date(9, 1)


def test_append_after_a_mismatch_is_refused() -> None:
    log = log_with(1, 1)
    assert log.maybe_append(2, 2, entries(3, 2)) is None
    assert log.maybe_append(5, 1, entries(6, 2)) is None
    assert log.last_index == 2


def test_a_conflict_replaces_the_tail_and_unmarks_stable_entries() -> None:
    log = log_with(1, 1, 1, 1)
    assert log.stable_index == 4
    appended = log.maybe_append(2, 1, entries(3, 2, 2, 2))
    assert appended is not None and appended == (5, 3)
    assert [log.term_at(i) for i in range(1, 6)] == [1, 1, 2, 2, 2]
    assert log.stable_index == 2
    assert log.unstable_entries() == entries(3, 2, 2, 2)


def test_a_late_duplicate_never_cuts_newer_entries() -> None:
    log = log_with(1, 2, 2, 2)
    appended = log.maybe_append(1, 1, entries(2, 2))
    assert appended == (2, None)  # matches up to 2; 3 and 4 stay
    assert log.last_index == 4


def test_a_committed_entry_never_conflicts() -> None:
    log = log_with(1, 1, 1, commit=3)
    with pytest.raises(InvariantError, match="committed"):
        log.maybe_append(2, 1, entries(3, 2))


def test_commit_only_moves_forward_and_not_past_the_log() -> None:
    log = log_with(1, 1, 1)
    assert log.commit_to(2) and not log.commit_to(1)
    assert log.commit_index == 2
    with pytest.raises(InvariantError, match="past the last index"):
        log.commit_to(9)


def test_stable_to_ignores_entries_replaced_meanwhile() -> None:
    log = RaftLog()
    log.append(entries(1, 1, 1, 1))
    handed_out = log.unstable_entries()
    log.maybe_append(1, 1, entries(2, 2, 2))  # a new leader replaced 2 and 3
    log.stable_to(handed_out[-1].index, handed_out[-1].term)
    assert log.stable_index == 0
    log.stable_to(1, 1)
    assert log.unstable_entries() == entries(2, 2, 2)


def test_last_index_with_term_at_most_bisects_the_terms() -> None:
    log = RaftLog(2, 1, entries(3, 1, 2, 2, 4, 4, 5))
    assert log.last_index_with_term_at_most(2, hi=8) == 5
    assert log.last_index_with_term_at_most(3, hi=8) == 5
    assert log.last_index_with_term_at_most(4, hi=6) == 6
    assert log.last_index_with_term_at_most(0, hi=8) == 2  # nothing after the snapshot
    assert log.last_index_with_term_at_most(9, hi=100) == 8


def test_compaction_keeps_the_entries_after_the_applied_index() -> None:
    log = log_with(1, 1, 2, 2, commit=4)
    with pytest.raises(InvariantError, match="applied only"):
        log.compact(3)
    log.applied_to(3)
    log.compact(3)
    assert (log.snapshot_index, log.snapshot_term, log.first_index) == (3, 2, 4)
    assert log.entries_to_apply() == entries(4, 2)


def test_restore_replaces_everything_with_the_snapshot() -> None:
    log = log_with(1, 1, commit=1)
    log.restore(10, 3)
    assert (log.first_index, log.last_index, log.last_term) == (11, 10, 3)
    assert (log.commit_index, log.applied_index, log.stable_index) == (10, 10, 10)
    assert log.entries_to_apply() == []
    with pytest.raises(InvariantError, match="not past the commit index"):
        log.restore(9, 3)


def test_appends_must_be_contiguous_and_terms_must_not_decrease() -> None:
    log = log_with(2)
    with pytest.raises(InvariantError, match="where 2 belongs"):
        log.append(entries(3, 2))
    with pytest.raises(InvariantError, match="never decrease"):
        log.append(entries(2, 1))
