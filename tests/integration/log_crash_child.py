"""The child process of the log crash test (tests/integration/test_log_crash.py).

Run as `python -m tests.integration.log_crash_child DIR ROUND SEED [MAX_SECONDS]`.
It opens (and so recovers) the log in DIR and the cursor log `DIR/cursor`,
prints `ready <next_offset>`, then appends from many concurrent writers
through a GroupCommitter with fsync `always` until it is killed (or until
MAX_SECONDS pass, so it never outlives a broken parent).

Acknowledgement lines on stdout, each written with one `write` after the data
it describes is durable:

    <base_offset> <count> <writer_id> <seq_first>   records appended and fsynced
    ack <lo> <hi>                                    [lo, hi) in the cursor log, synced

Record values are self-describing: `record_value(writer_id, seq)`, so the
parent can check every record byte for byte without being told its contents.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import sys
import time
from collections.abc import Sequence

from logbroker.queue.fsync_policy import FsyncPolicy
from logbroker.queue.group_commit import GroupCommitter
from segments.cursor_log import CursorLog
from segments.filesystem import RealFileSystem
from segments.log import AppendResult, Log, LogConfig
from segments.record_batch import Record

SEGMENT_BYTES_MAX = 256 * 1024
CURSOR_FILE = "cursor"
# Small, so compactions (write tmp, rename) happen while the child is killed.
CURSOR_COMPACT_MIN_ENTRIES = 16
WRITERS = 16
GROUP_RECORDS_MAX = 5
PAYLOAD_BYTES_MIN = 10
PAYLOAD_BYTES_MAX = 3000
# Writer ids are round * WRITER_ID_STRIDE + index, so they are unique across rounds.
WRITER_ID_STRIDE = 1000
DEFAULT_MAX_SECONDS = 30.0


def log_config() -> LogConfig:
    return LogConfig(segment_bytes_max=SEGMENT_BYTES_MAX)


def deterministic_payload(writer_id: int, seq: int) -> bytes:
    """PAYLOAD_BYTES_MIN..PAYLOAD_BYTES_MAX bytes that depend only on (writer_id, seq)."""
    seed = f"{writer_id}/{seq}".encode()
    span = PAYLOAD_BYTES_MAX - PAYLOAD_BYTES_MIN + 1
    digest = hashlib.blake2b(seed, digest_size=8).digest()
    length = PAYLOAD_BYTES_MIN + int.from_bytes(digest) % span
    return hashlib.shake_128(seed).digest(length)


def record_value(writer_id: int, seq: int) -> bytes:
    return f"{writer_id}:{seq}:".encode() + deterministic_payload(writer_id, seq)


def parse_value(value: bytes) -> tuple[int, int] | None:
    """The (writer_id, seq) a value names, or None if it does not have the prefix."""
    parts = value.split(b":", 2)
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return int(parts[0]), int(parts[1])


def _emit(line: str) -> None:
    # One write() of a short line to a pipe is atomic: the parent never sees half a line.
    os.write(sys.stdout.fileno(), line.encode())


class Child:
    def __init__(self, directory: str, round_number: int, seed: int, max_seconds: float) -> None:
        self.directory = directory
        self.round_number = round_number
        self.rng = random.Random(seed)
        self.deadline = time.monotonic() + max_seconds
        fs = RealFileSystem()
        self.log = Log.open(fs, directory, log_config())
        self.cursor = CursorLog.open(
            fs, os.path.join(directory, CURSOR_FILE), CURSOR_COMPACT_MIN_ENTRIES
        )
        # Every offset below this is durable: the committer resolves in offset order.
        self.durable_end = self.log.next_offset

    def running(self) -> bool:
        return time.monotonic() < self.deadline

    async def writer(
        self, committer: GroupCommitter[Sequence[Record], AppendResult], index: int
    ) -> None:
        writer_id = self.round_number * WRITER_ID_STRIDE + index
        rng = random.Random(self.rng.getrandbits(64))
        seq = 0
        while self.running():
            count = rng.randint(1, GROUP_RECORDS_MAX)
            now_ms = time.time_ns() // 1_000_000
            records = [Record(record_value(writer_id, seq + i), now_ms) for i in range(count)]
            result = await committer.submit(records)
            if result.next_offset - result.base_offset != count:
                raise AssertionError(f"append of {count} records gave {result}")
            self.durable_end = max(self.durable_end, result.next_offset)
            _emit(f"{result.base_offset} {count} {writer_id} {seq}\n")
            seq += count

    async def acker(self) -> None:
        """Ack ranges of durable offsets into the cursor log, mostly in order, some holes."""
        rng = random.Random(self.rng.getrandbits(64))
        while self.running():
            await asyncio.sleep(rng.uniform(0.001, 0.01))
            floor = self.cursor.ack_floor
            if floor >= self.durable_end:
                continue
            # Mostly the next offsets past the floor; sometimes anywhere, leaving holes.
            lo = floor if rng.random() < 0.6 else rng.randrange(floor, self.durable_end)
            hi = min(lo + rng.randint(1, 40), self.durable_end)
            self.cursor.append([(lo, hi)])
            await asyncio.to_thread(self.cursor.sync)
            _emit(f"ack {lo} {hi}\n")

    async def run(self) -> None:
        committer: GroupCommitter[Sequence[Record], AppendResult] = GroupCommitter(
            self.log, FsyncPolicy.parse("always")
        )
        tasks = [asyncio.create_task(self.writer(committer, i)) for i in range(WRITERS)]
        tasks.append(asyncio.create_task(self.acker()))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await committer.close()
            self.cursor.close()
            self.log.close()


def main(argv: Sequence[str]) -> int:
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    directory, round_number, seed = argv[0], int(argv[1]), int(argv[2])
    max_seconds = float(argv[3]) if len(argv) == 4 else DEFAULT_MAX_SECONDS
    child = Child(directory, round_number, seed, max_seconds)
    _emit(f"ready {child.log.next_offset}\n")
    asyncio.run(child.run())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
