"""`RaftStorage`: one node's Raft state on disk - the only Raft module that does I/O.

Layout under `directory` (all through the `FileSystem` seam, so tests can use
`MemoryFileSystem` and lose power at will):

- `log/`: a segments `Log` whose offsets are the entry indexes; a record's
  value is `term u64 | kind u8 | data`;
- `hardstate`: `term u64 | commit u64 | vote_length u16 (0xFFFF: none) | vote | crc32c u32`;
- `snapshot`: `index u64 | term u64 | membership_length u32 | membership | data | crc32c u32`.

Both small files are replaced whole with `write_file_atomically`, so a crash
leaves the old or the new one, never a mix; their CRC guards against bit rot.

Saving a `Ready` (`write`, then `sync`): a received snapshot first (its file,
then the log restarted after it), then the entries (truncating any persisted
entries they replace), then an fsync of the log, and last the hard state.
Entries before hard state means a persisted commit index never points past
the persisted log. The hard-state file is rewritten only when the term or the
vote changes - those must be durable before any message goes out - and the
commit index rides along then. A commit index that changed alone is not worth
an fsync: a restarted node relearns it from its leader.

Recovery (`load`) reconciles a crash between steps: a log that does not
continue the snapshot (it ends before it, starts after it, or disagrees on the
snapshot's term) is restarted right after the snapshot; records at or below
the snapshot are skipped (retention deletes only whole segments).
"""

from __future__ import annotations

import os
import struct

import crc32c

from replication.raft.errors import InvariantError
from replication.raft.membership import Membership
from replication.raft.messages import Entry, EntryKind, Snapshot
from replication.raft.ready import HardState, PersistedState, Ready
from segments.errors import StorageError
from segments.filesystem import FileSystem, write_file_atomically
from segments.log import Log, LogConfig
from segments.record_batch import Record

HARD_STATE_NAME = "hardstate"
SNAPSHOT_NAME = "snapshot"
LOG_NAME = "log"

_ENTRY_HEAD = struct.Struct("<QB")
_HARD_STATE = struct.Struct("<QQH")
_SNAPSHOT_HEAD = struct.Struct("<QQI")
_CRC = struct.Struct("<I")
_NO_VOTE = 0xFFFF
_READ_BYTES = 1 << 20


class RaftStorageCorruptError(StorageError):
    """A Raft state file failed its checksum or framing check."""


def encode_entry(entry: Entry) -> bytes:
    return _ENTRY_HEAD.pack(entry.term, entry.kind) + entry.data


def decode_entry(index: int, value: bytes) -> Entry:
    term, kind = _ENTRY_HEAD.unpack_from(value)
    return Entry(term, index, EntryKind(kind), value[_ENTRY_HEAD.size :])


def _seal(body: bytes) -> bytes:
    return body + _CRC.pack(crc32c.crc32c(body))


def _unseal(path: str, data: bytes) -> bytes:
    body, tail = data[: -_CRC.size], data[-_CRC.size :]
    if len(data) < _CRC.size or _CRC.unpack(tail)[0] != crc32c.crc32c(body):
        raise RaftStorageCorruptError(f"{path}: checksum mismatch")
    return body


def encode_hard_state(state: HardState) -> bytes:
    vote = state.vote.encode() if state.vote is not None else b""
    length = len(vote) if state.vote is not None else _NO_VOTE
    return _seal(_HARD_STATE.pack(state.term, state.commit, length) + vote)


def decode_hard_state(path: str, data: bytes) -> HardState:
    body = _unseal(path, data)
    term, commit, length = _HARD_STATE.unpack_from(body)
    vote = None if length == _NO_VOTE else body[_HARD_STATE.size :].decode()
    return HardState(term, vote, commit)


def encode_snapshot(snapshot: Snapshot) -> bytes:
    membership = snapshot.membership.encode()
    head = _SNAPSHOT_HEAD.pack(snapshot.index, snapshot.term, len(membership))
    return _seal(head + membership + snapshot.data)


def decode_snapshot(path: str, data: bytes) -> Snapshot:
    body = _unseal(path, data)
    index, term, length = _SNAPSHOT_HEAD.unpack_from(body)
    start = _SNAPSHOT_HEAD.size
    membership = Membership.decode(body[start : start + length])
    return Snapshot(index, term, membership, body[start + length :])


class RaftStorage:
    def __init__(self, fs: FileSystem, directory: str, log: Log) -> None:
        self._fs = fs
        self._directory = directory
        self._log = log
        self._hard_state_path = os.path.join(directory, HARD_STATE_NAME)
        self._snapshot_path = os.path.join(directory, SNAPSHOT_NAME)
        self._on_disk = HardState()

    @classmethod
    def open(
        cls, fs: FileSystem, directory: str, log_config: LogConfig | None = None
    ) -> RaftStorage:
        fs.makedirs(directory)
        log = Log.open(fs, os.path.join(directory, LOG_NAME), log_config, initial_offset=1)
        return cls(fs, directory, log)

    # ------------------------------------------------------------- recovery

    def load(self) -> PersistedState | None:
        """The persisted state, or None if this node never saved anything."""
        snapshot = self._read_snapshot()
        hard_state = self._read_hard_state()
        if snapshot is not None:
            self._reconcile_with(snapshot)
        entries = self._read_entries(snapshot.index + 1 if snapshot is not None else 1)
        if hard_state is None and snapshot is None and not entries:
            return None
        self._on_disk = hard_state or HardState()
        return PersistedState(self._on_disk, snapshot, tuple(entries))

    def _read_snapshot(self) -> Snapshot | None:
        if not self._fs.exists(self._snapshot_path):
            return None
        return decode_snapshot(self._snapshot_path, self._read_file(self._snapshot_path))

    def _read_hard_state(self) -> HardState | None:
        if not self._fs.exists(self._hard_state_path):
            return None
        return decode_hard_state(self._hard_state_path, self._read_file(self._hard_state_path))

    def _read_file(self, path: str) -> bytes:
        handle = self._fs.open(path)
        try:
            return handle.read_at(0, handle.size())
        finally:
            handle.close()

    def _reconcile_with(self, snapshot: Snapshot) -> None:
        """Restart the log after `snapshot` unless it continues it."""
        log = self._log
        continues = (
            log.log_start_offset <= snapshot.index + 1 <= log.next_offset
            and (snapshot.index < log.log_start_offset or self._term_at(snapshot.index)
                 == snapshot.term)
        )
        if not continues:
            log.truncate_fully_and_start_at(snapshot.index + 1)

    def _term_at(self, index: int) -> int:
        return decode_entry(index, self._log.read(index, 1)[0].value).term

    def _read_entries(self, start: int) -> list[Entry]:
        log = self._log
        offset = max(start, log.log_start_offset)
        entries: list[Entry] = []
        while offset < log.next_offset:
            for record in log.read(offset, _READ_BYTES):
                entries.append(decode_entry(record.offset, record.value))
            offset = entries[-1].index + 1
        return entries

    # --------------------------------------------------------------- saving

    def save(self, ready: Ready) -> None:
        """Make `ready`'s snapshot, entries and hard state durable, in that order."""
        self.write(ready)
        self.sync(ready)

    def write(self, ready: Ready) -> None:
        """The first half of `save`: the snapshot (durably) and the entries (not yet)."""
        if ready.snapshot is not None:
            write_file_atomically(self._fs, self._snapshot_path, encode_snapshot(ready.snapshot))
            self._log.truncate_fully_and_start_at(ready.snapshot.index + 1)
        if ready.entries:
            self._append(ready.entries)

    def _append(self, entries: tuple[Entry, ...]) -> None:
        first = entries[0].index
        if first > self._log.next_offset or first < self._log.log_start_offset:
            raise InvariantError(
                f"entries from {first} do not continue the persisted log "
                f"[{self._log.log_start_offset}, {self._log.next_offset})"
            )
        if first < self._log.next_offset:
            self._log.truncate_to(first)
        self._log.append([Record(encode_entry(entry), 0) for entry in entries])

    def sync(self, ready: Ready) -> None:
        """The second half of `save`: fsync the entries, then write the hard state."""
        if ready.entries:
            self._log.sync()
        state = ready.hard_state
        if state is not None and (state.term, state.vote) != (
            self._on_disk.term, self._on_disk.vote
        ):
            write_file_atomically(self._fs, self._hard_state_path, encode_hard_state(state))
            self._on_disk = state

    def save_snapshot(self, snapshot: Snapshot) -> None:
        """Persist a snapshot the application took (`RaftNode.compact`), then drop
        the log segments it makes unnecessary."""
        write_file_atomically(self._fs, self._snapshot_path, encode_snapshot(snapshot))
        self._log.delete_before(snapshot.index + 1)

    def close(self) -> None:
        self._log.close()
