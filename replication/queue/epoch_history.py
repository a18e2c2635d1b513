"""`EpochHistory`: where each leader epoch of a queue's log began.

Theory of operation. Every record of a replicated queue's log was written by
the leader of one epoch; a new leader starts its epoch at its log end. The
history lists (epoch, start offset) pairs, epochs rising, start offsets
never falling. Two replicas agree on every offset below the end of the last
epoch they share (Kafka's leader-epoch rule), so a follower that resumes
with a last epoch E learns from its leader where E ended there
(`end_offset_of`) and cuts its log at that point if it holds more: what it
holds beyond was written by a leader whose epoch did not survive.

Invariants: epochs strictly rise; start offsets never fall; the history is
small (one entry per leader change, compacted below the log's start) and
persisted with an atomic rename whenever it changes, before the records of
a new epoch are written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass

from segments.filesystem import FileSystem

MAX_ENTRIES = 4096
FILE_NAME = "epochs"


class EpochHistoryError(ValueError):
    """An epoch that does not follow the history (a bug or a damaged file)."""


@dataclass(frozen=True, slots=True)
class EpochStart:
    epoch: int
    start_offset: int


class EpochHistory:
    def __init__(self, entries: Iterable[EpochStart] = ()) -> None:
        self._entries: list[EpochStart] = []
        for entry in entries:
            self.begin(entry.epoch, entry.start_offset)

    @property
    def entries(self) -> tuple[EpochStart, ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int:
        """The last epoch this log has records (or a start) of; 0 for none."""
        return self._entries[-1].epoch if self._entries else 0

    def begin(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; False when already known."""
        if self._entries:
            last = self._entries[-1]
            if epoch == last.epoch and start_offset == last.start_offset:
                return False
            if epoch <= last.epoch:
                raise EpochHistoryError(f"epoch {epoch} does not follow epoch {last.epoch}")
            if start_offset < last.start_offset:
                raise EpochHistoryError(
                    f"epoch {epoch} starts at {start_offset}, before epoch {last.epoch} "
                    f"at {last.start_offset}")
        self._entries.append(EpochStart(epoch, start_offset))
        if len(self._entries) > MAX_ENTRIES:
            del self._entries[0]  # only offsets long gone from the log lose their epoch
        return True

    def end_offset_of(self, epoch: int, log_end: int) -> tuple[int, int]:
        """(the largest epoch here <= `epoch`, the offset where it ended).

        The end is the start of the next epoch, or `log_end` for the latest.
        For an epoch older than everything here: (`epoch`, the first start offset),
        as Kafka answers. The records below that start were compacted away with the
        log's head (retention deleted them, settled), so they do not diverge: a
        follower keeps its own copies of them and cuts only what lies beyond.
        """
        found = 0
        for index, entry in enumerate(self._entries):
            if entry.epoch > epoch:
                return (epoch if index == 0 else found), entry.start_offset
            found = entry.epoch
        return found, log_end

    def truncate_from(self, offset: int) -> None:
        """Forget epochs that start at or after `offset` (the log was cut there)."""
        while self._entries and self._entries[-1].start_offset >= offset:
            self._entries.pop()

    def forget_below(self, log_start: int) -> None:
        """Keep one entry at or below the log's start: older ones describe nothing."""
        while len(self._entries) > 1 and self._entries[1].start_offset <= log_start:
            del self._entries[0]

    def epoch_at(self, offset: int) -> int:
        """The epoch the record at `offset` was written in (0 when unknown)."""
        found = 0
        for entry in self._entries:
            if entry.start_offset > offset:
                break
            found = entry.epoch
        return found

    # ---------------------------------------------------------------- files

    def to_json(self) -> list[list[int]]:
        return [[entry.epoch, entry.start_offset] for entry in self._entries]

    @classmethod
    def from_json(cls, document: object) -> EpochHistory:
        if not isinstance(document, list):
            raise EpochHistoryError("an epoch history is a list of [epoch, start_offset]")
        entries = []
        for item in document:
            if (not isinstance(item, list) or len(item) != 2
                    or not all(type(v) is int and v >= 0 for v in item)):  # not bool
                raise EpochHistoryError(f"bad epoch history entry {item!r}")
            entries.append(EpochStart(item[0], item[1]))
        return cls(entries)

    @classmethod
    def load(cls, fs: FileSystem, directory: str) -> EpochHistory:
        path = os.path.join(directory, FILE_NAME)
        if not fs.exists(path):
            return cls()
        handle = fs.open(path)
        try:
            data = handle.read_at(0, handle.size())
        finally:
            handle.close()
        try:
            return cls.from_json(json.loads(data))
        except ValueError as error:
            raise EpochHistoryError(f"{path}: {error}") from None

    def save(self, fs: FileSystem, directory: str) -> None:
        """Write, fsync, rename over the old file, fsync the directory."""
        path = os.path.join(directory, FILE_NAME)
        temporary = path + ".tmp"
        if fs.exists(temporary):
            fs.remove(temporary)
        handle = fs.open(temporary)
        try:
            handle.append(json.dumps(self.to_json(), separators=(",", ":")).encode())
            handle.sync()
        finally:
            handle.close()
        fs.rename(temporary, path)
        fs.sync_dir(directory)
