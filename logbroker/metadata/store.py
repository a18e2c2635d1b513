"""`MetadataStore`: the I/O shell that keeps `MetadataState` on disk as a log.

Layout under `<data_dir>/metadata/`:

- `log/`: a segments `Log`, one record per applied command (the value is
  `encode_command`'s bytes), offsets counting commands;
- `snapshot.json`: `{"applied_offset": N, "crc32c": C, "state": ...}`, the
  state after the first N commands, replaced with `write_file_atomically`
  every `snapshot_every` commands; the log segments wholly below N are then
  deleted. `crc32c` covers the compact JSON of `state`.

Ordering of `apply(command)`: encode and bound the size (406 above
`max_command_bytes`), *check* the command against the pure state (refusals
end here and never reach the log), *append* it and fsync, then *apply* it to
the state and return its events. So a command is acknowledged only once it is
durable, and only commands that succeeded are ever logged: replay never meets
a refused one. A crash after the fsync and before the reply is fine (the
command took effect; the client sees a dropped connection, as with RabbitMQ).
Replay still skips a command that raises `MetadataError`, deterministically,
so a log written by a different version cannot wedge startup.

Any I/O error while persisting a command stops the store: later calls raise
`MetadataStoreFailedError`, and only reopening (replaying what survived)
tells whether the record made it, which is the honest answer after a failed
fsync. The failed command was not applied and was not acknowledged. A failed
snapshot *file* write is harmless (the log still has everything) and is only
remembered in `last_snapshot_error`; a failure while trimming the log after a
snapshot stops the store like a failed append.

Recovery: load the snapshot if any, open the log (creating it at the
snapshot's offset), replay from the snapshot's offset to the end. When the
store is brand new, the `bootstrap` commands are applied and written as one
batch, which the log's CRC makes all-or-nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import crc32c

from logbroker.metadata.commands import Command, CommandDecodeError, decode_command, encode_command
from logbroker.metadata.errors import MetadataError, precondition_failed
from logbroker.metadata.events import Applied
from logbroker.metadata.state import MetadataState
from segments.clock import SYSTEM_CLOCK
from segments.errors import StorageError
from segments.filesystem import FileSystem, write_file_atomically
from segments.log import Log, LogConfig
from segments.record_batch import Record

SNAPSHOT_NAME = "snapshot.json"
LOG_NAME = "log"


class MetadataStoreError(Exception):
    """The metadata on disk cannot be used as it is."""


class MetadataCorruptError(MetadataStoreError):
    pass


class MetadataStoreFailedError(MetadataStoreError):
    """An fsync failed earlier; reopen the store to learn what is durable."""


@dataclass(frozen=True)
class MetadataStoreConfig:
    snapshot_every: int = 1000
    max_command_bytes: int = 1 << 20
    log: LogConfig = field(default_factory=lambda: LogConfig(segment_bytes_max=8 << 20))

    def __post_init__(self) -> None:
        if self.snapshot_every < 1:
            raise ValueError("snapshot_every must be at least 1")
        if self.max_command_bytes < 1:
            raise ValueError("max_command_bytes must be positive")


def _state_bytes(state: Any) -> bytes:
    return json.dumps(state, separators=(",", ":"), allow_nan=False).encode()


def load_snapshot(fs: FileSystem, path: str) -> tuple[MetadataState, int] | None:
    if not fs.exists(path):
        return None
    handle = fs.open(path)
    try:
        raw = handle.read_at(0, handle.size())
    finally:
        handle.close()
    try:
        document = json.loads(raw)
        state_document = document["state"]
        if crc32c.crc32c(_state_bytes(state_document)) != document["crc32c"]:
            raise MetadataCorruptError(f"{path}: checksum mismatch")
        return MetadataState.from_snapshot(state_document), int(document["applied_offset"])
    except (ValueError, KeyError, TypeError) as error:
        raise MetadataCorruptError(f"{path}: unreadable snapshot: {error!r}") from error


class MetadataStore:
    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        log: Log,
        state: MetadataState,
        config: MetadataStoreConfig,
        clock: Callable[[], int],
    ) -> None:
        self._fs = fs
        self._directory = directory
        self._log = log
        self._state = state
        self._config = config
        self._clock = clock
        self._since_snapshot = 0
        self._failed = False
        self.last_snapshot_error: OSError | StorageError | None = None

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        data_dir: str,
        bootstrap: Sequence[Command] = (),
        config: MetadataStoreConfig | None = None,
        clock: Callable[[], int] = SYSTEM_CLOCK.wall_ms,
    ) -> MetadataStore:
        """Recover the metadata in `<data_dir>/metadata`; bootstrap it if brand new."""
        config = config or MetadataStoreConfig()
        directory = os.path.join(data_dir, "metadata")
        fs.makedirs(directory)
        loaded = load_snapshot(fs, os.path.join(directory, SNAPSHOT_NAME))
        state, offset = loaded if loaded is not None else (MetadataState(), 0)
        log = Log.open(fs, os.path.join(directory, LOG_NAME), config.log, initial_offset=offset)
        try:
            if log.next_offset < offset:
                log.truncate_fully_and_start_at(offset)  # the snapshot covers all of it
            if log.log_start_offset > offset:
                raise MetadataCorruptError(
                    f"the metadata log starts at {log.log_start_offset}, after the snapshot's "
                    f"offset {offset}: commands are missing"
                )
            _replay(log, state, offset)
            store = cls(fs, directory, log, state, config, clock)
            if bootstrap and loaded is None and log.next_offset == 0:
                store._bootstrap(bootstrap)
        except BaseException:
            with contextlib.suppress(Exception):
                log.close()
            raise
        return store

    @property
    def state(self) -> MetadataState:
        return self._state

    @property
    def next_offset(self) -> int:
        """How many commands the metadata has applied since it was created."""
        return self._log.next_offset

    def apply(self, command: Command) -> Applied:
        """Check, persist (fsync), then apply `command`; see the module doc."""
        self._check_usable()
        data = self._encode(command)
        self._state.check(command)
        self._persist([data])
        applied = self._state.apply(command)
        self._since_snapshot += 1
        if self._since_snapshot >= self._config.snapshot_every:
            self._snapshot_quietly()
        return applied

    def _encode(self, command: Command) -> bytes:
        data = encode_command(command)
        if len(data) > self._config.max_command_bytes:
            raise precondition_failed(
                f"metadata command too large: {len(data)} bytes, the limit is "
                f"{self._config.max_command_bytes}"
            )
        return data

    def _persist(self, values: list[bytes]) -> None:
        now = self._clock()
        try:
            self._log.append([Record(value, now) for value in values])
            self._log.sync()
        except BaseException:
            self._failed = True
            raise

    def _bootstrap(self, commands: Sequence[Command]) -> None:
        values = [self._encode(command) for command in commands]
        for command in commands:
            self._state.apply(command)
        self._persist(values)

    def _check_usable(self) -> None:
        if self._failed:
            raise MetadataStoreFailedError(
                "an earlier write to the metadata log failed; reopen the metadata store"
            )

    def write_snapshot(self) -> None:
        """Write the snapshot now and drop the log segments it makes redundant."""
        self._check_usable()
        offset = self._log.next_offset
        state_document = self._state.snapshot()
        document = {
            "applied_offset": offset,
            "crc32c": crc32c.crc32c(_state_bytes(state_document)),
            "state": state_document,
        }
        path = os.path.join(self._directory, SNAPSHOT_NAME)
        write_file_atomically(self._fs, path, json.dumps(document, separators=(",", ":")).encode())
        self._since_snapshot = 0
        try:
            self._log.delete_before(offset)
        except BaseException:
            self._failed = True
            raise

    def _snapshot_quietly(self) -> None:
        # The command is already durable and applied: a failed snapshot must
        # not turn it into an error. The next command retries the file; a
        # failed trim has stopped the store (see the module doc).
        try:
            self.write_snapshot()
            self.last_snapshot_error = None
        except (OSError, StorageError) as error:
            self.last_snapshot_error = error

    def close(self) -> None:
        self._log.close()

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _replay(log: Log, state: MetadataState, offset: int) -> None:
    position = offset
    while position < log.next_offset:
        records = log.read(position)
        if not records:
            raise MetadataCorruptError(f"the metadata log has no record at offset {position}")
        for record in records:
            try:
                command = decode_command(record.value)
            except CommandDecodeError as error:
                raise MetadataCorruptError(f"metadata record {record.offset}: {error}") from error
            with contextlib.suppress(MetadataError):
                # Refused when written too; skipping it is deterministic (module doc).
                state.apply(command)
            position = record.offset + 1
