"""`RaftLog`: the in-memory view of one node's Raft log.

The log is a snapshot point (`snapshot_index`, `snapshot_term`: everything up
to there is compacted into the application's snapshot) followed by the
entries after it. Three positions move along it:

    snapshot_index <= applied_index <= commit_index <= last_index
    stable_index <= last_index     (entries after stable_index are not yet persisted)

Entries after `stable_index` are handed to the shell in a `Ready` and marked
stable when it reports them persisted. A conflicting entry from a new leader
truncates the tail; if that reaches below `stable_index`, `stable_index` moves
back, and the shell's storage replaces its persisted entries from the first
new one on.

Terms never decrease along a log, which lets `last_index_with_term_at_most`
bisect instead of walking back entry by entry.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import NamedTuple

from replication.raft.errors import InvariantError
from replication.raft.messages import Entry


class Appended(NamedTuple):
    """What `maybe_append` did: the last index now matching the leader, and where
    (if anywhere) it replaced a conflicting tail."""

    match_index: int
    replaced_from: int | None


class RaftLog:
    def __init__(
        self,
        snapshot_index: int = 0,
        snapshot_term: int = 0,
        entries: Sequence[Entry] = (),
        commit_index: int = 0,
    ) -> None:
        self._snapshot_index = snapshot_index
        self._snapshot_term = snapshot_term
        self._entries: list[Entry] = []
        self._check_contiguous(snapshot_index + 1, entries)
        self._entries.extend(entries)
        # Restored entries come from storage, so they are stable already.
        self.stable_index = self.last_index
        self.commit_index = max(snapshot_index, min(commit_index, self.last_index))
        self.applied_index = snapshot_index

    # -------------------------------------------------------------- positions

    @property
    def snapshot_index(self) -> int:
        return self._snapshot_index

    @property
    def snapshot_term(self) -> int:
        return self._snapshot_term

    @property
    def first_index(self) -> int:
        return self._snapshot_index + 1

    @property
    def last_index(self) -> int:
        return self._snapshot_index + len(self._entries)

    @property
    def last_term(self) -> int:
        return self._entries[-1].term if self._entries else self._snapshot_term

    def term_at(self, index: int) -> int | None:
        """The term of the entry at `index`; None if compacted away or past the end."""
        if index == self._snapshot_index:
            return self._snapshot_term
        if self._snapshot_index < index <= self.last_index:
            return self._entries[index - self.first_index].term
        return None

    def match_term(self, index: int, term: int) -> bool:
        return self.term_at(index) == term

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Is a log ending at (last_index, last_term) at least as up to date as this one?"""
        return (last_term, last_index) >= (self.last_term, self.last_index)

    def entry(self, index: int) -> Entry:
        if not self._snapshot_index < index <= self.last_index:
            raise IndexError(f"no entry {index} in ({self._snapshot_index}, {self.last_index}]")
        return self._entries[index - self.first_index]

    def slice(self, lo: int, hi: int, max_count: int | None = None) -> list[Entry]:
        """Entries with index in `[lo, hi)`, at most `max_count` of them."""
        if lo < self.first_index:
            raise IndexError(f"entries before {self.first_index} are compacted")
        hi = min(hi, self.last_index + 1)
        if max_count is not None:
            hi = min(hi, lo + max_count)
        if lo >= hi:
            return []
        return self._entries[lo - self.first_index : hi - self.first_index]

    def last_index_with_term_at_most(self, term: int, hi: int) -> int:
        """The largest index <= `hi` whose term is <= `term` (`snapshot_index` if none)."""
        hi = min(hi, self.last_index)
        if hi <= self._snapshot_index:
            return self._snapshot_index
        end = hi - self._snapshot_index
        count = bisect_right(self._entries, term, 0, end, key=lambda entry: entry.term)
        return self._snapshot_index + count

    # ----------------------------------------------------------------- writes

    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries that continue the log (the leader's own proposals)."""
        self._check_contiguous(self.last_index + 1, entries)
        if entries and entries[0].term < self.last_term:
            raise InvariantError("terms never decrease along a log")
        self._entries.extend(entries)

    def maybe_append(
        self, prev_index: int, prev_term: int, entries: Sequence[Entry]
    ) -> Appended | None:
        """A follower taking entries from its leader, after the consistency check.

        None if the log lacks (prev_index, prev_term); else the last index now
        known to match the leader (`prev_index` + len(entries)), and where the
        tail was replaced.
        Entries already present are kept; only from the first conflict on is
        the tail replaced, so a late, duplicated message never cuts entries
        that a newer one already appended.
        """
        if not self.match_term(prev_index, prev_term):
            return None
        self._check_contiguous(prev_index + 1, entries)
        for position, entry in enumerate(entries):
            if self.term_at(entry.index) != entry.term:
                self._replace_from(entry.index, entries[position:])
                return Appended(prev_index + len(entries), entry.index)
        return Appended(prev_index + len(entries), None)

    def _replace_from(self, index: int, entries: Sequence[Entry]) -> None:
        if index <= self.commit_index:
            raise InvariantError(f"entry {index} conflicts but is committed")
        del self._entries[index - self.first_index :]
        self._entries.extend(entries)
        self.stable_index = min(self.stable_index, index - 1)

    def commit_to(self, index: int) -> bool:
        """Raise the commit index (never lower it); True if it moved."""
        if index <= self.commit_index:
            return False
        if index > self.last_index:
            raise InvariantError(f"commit {index} is past the last index {self.last_index}")
        self.commit_index = index
        return True

    def unstable_entries(self) -> list[Entry]:
        return self._entries[self.stable_index - self._snapshot_index :]

    def stable_to(self, index: int, term: int) -> None:
        """The shell persisted entries up to (index, term).

        Ignored if the entry was replaced meanwhile: the replacement is still
        unstable and will come in the next Ready.
        """
        if index > self.stable_index and self.match_term(index, term):
            self.stable_index = index

    def entries_to_apply(self) -> list[Entry]:
        """Committed entries not yet handed to the application, in order."""
        return self.slice(self.applied_index + 1, self.commit_index + 1)

    def applied_to(self, index: int) -> None:
        self.applied_index = max(self.applied_index, index)

    def compact(self, index: int) -> None:
        """Drop the entries up to `index`, which a snapshot now stands for."""
        term = self.term_at(index)
        if term is None or index < self._snapshot_index:
            raise InvariantError(f"cannot compact to {index}: not in the log")
        if index > self.applied_index:
            raise InvariantError(f"cannot compact to {index}: applied only to "
                                    f"{self.applied_index}")
        del self._entries[: index - self._snapshot_index]
        self._snapshot_index, self._snapshot_term = index, term

    def restore(self, index: int, term: int) -> None:
        """Replace the whole log by a snapshot at (index, term) received from the leader."""
        if index <= self.commit_index:
            raise InvariantError(f"snapshot {index} is not past the commit index")
        self._entries.clear()
        self._snapshot_index, self._snapshot_term = index, term
        self.commit_index = self.applied_index = self.stable_index = index

    @staticmethod
    def _check_contiguous(first: int, entries: Sequence[Entry]) -> None:
        for offset, entry in enumerate(entries):
            if entry.index != first + offset:
                raise InvariantError(f"entry {entry.index} where {first + offset} belongs")
