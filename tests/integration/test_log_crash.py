"""Crash test with real processes: SIGKILL a writer mid-flight, then check recovery.

Each round starts `tests.integration.log_crash_child` on the same directory. The
child recovers the log, appends through a GroupCommitter with fsync `always`
and acknowledges on stdout what became durable; the parent kills it with
SIGKILL after a random time, reopens the log itself and checks that every
acknowledged record is there, byte for byte, at its offset, that offsets are
dense, that nothing lies past `next_offset`, and that every acknowledged
cursor range survived. A process crash keeps the page cache, so this test
catches lost or torn *writes* and recovery bugs, not lost fsyncs (the
simulation tests with MemoryFileSystem cover those).

Environment knobs: LOG_CRASH_SEED, LOG_CRASH_ROUNDS.
"""

from __future__ import annotations

import os
import random
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from segments.cursor_log import CursorLog
from segments.errors import OffsetOutOfRangeError
from segments.filesystem import RealFileSystem
from segments.log import Log
from segments.record_batch import Record
from segments.segment import NAME_DIGITS
from tests.integration.log_crash_child import (
    CURSOR_FILE,
    WRITER_ID_STRIDE,
    log_config,
    parse_value,
    record_value,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SEED = 20240611
DEFAULT_ROUNDS = 25
RUN_SECONDS_MIN = 0.05
RUN_SECONDS_MAX = 0.4
# Every few rounds the kill comes at a random time after the start instead of
# after `ready`, so it can land during interpreter start-up or recovery.
EARLY_KILL_EVERY = 5
READY_TIMEOUT_S = 15.0
CHILD_MAX_SECONDS = 30.0
TEST_BUDGET_S = 150.0
READ_BYTES = 1 << 20


@dataclass(frozen=True)
class AckedGroup:
    base_offset: int
    count: int
    writer_id: int
    seq_first: int


@dataclass
class ChildOutput:
    ready_next_offset: int | None = None
    groups: list[AckedGroup] = field(default_factory=list)
    cursor_ranges: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class Totals:
    rounds: int = 0
    early_kills: int = 0
    never_ready: int = 0
    groups_acked: int = 0
    records_acked: int = 0
    cursor_ranges_acked: int = 0
    records_found: int = 0
    torn_bytes: int = 0
    rounds_with_torn_tail: int = 0
    segments: int = 0


def parse_lines(data: bytes) -> ChildOutput:
    output = ChildOutput()
    lines = data.split(b"\n")
    # The last element is what follows the final newline: an incomplete line, never
    # an acknowledgement (the child writes each line with one atomic write).
    assert lines[-1] == b"", f"child wrote a partial line {lines[-1]!r}"
    for raw in lines[:-1]:
        fields = raw.decode().split()
        if fields[0] == "ready":
            assert output.ready_next_offset is None and len(fields) == 2, raw
            output.ready_next_offset = int(fields[1])
        elif fields[0] == "ack":
            assert output.ready_next_offset is not None, "ack before ready"
            output.cursor_ranges.append((int(fields[1]), int(fields[2])))
        else:
            assert output.ready_next_offset is not None, "append before ready"
            base, count, writer_id, seq = (int(value) for value in fields)
            output.groups.append(AckedGroup(base, count, writer_id, seq))
    return output


def run_child_round(
    directory: Path, round_number: int, child_seed: int, run_seconds: float, early_kill: bool
) -> bytes:
    """Start the child, kill it with SIGKILL, return everything it wrote to stdout."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.log_crash_child", str(directory),
         str(round_number), str(child_seed), str(CHILD_MAX_SECONDS)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    data = bytearray()
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            started = time.monotonic()
            kill_at = started + run_seconds if early_kill else started + READY_TIMEOUT_S
            ready = early_kill
            exited = False
            while time.monotonic() < kill_at:
                if not ready and b"\n" in data:
                    ready = True
                    kill_at = time.monotonic() + run_seconds
                    continue
                if selector.select(timeout=max(0.0, kill_at - time.monotonic())):
                    chunk = os.read(process.stdout.fileno(), 1 << 16)
                    if not chunk:
                        exited = True  # the child exited on its own: only an error does that
                        break
                    data += chunk
        if exited or process.poll() is not None:
            process.wait(timeout=10)
            stderr = process.stderr.read().decode(errors="replace")
            pytest.fail(f"child exited early with {process.returncode}:\n{stderr}")
        if not ready:
            pytest.fail(f"child not ready after {READY_TIMEOUT_S} s")
        os.kill(process.pid, signal.SIGKILL)
        # Everything written before the kill is still in the pipe; read to EOF.
        data += process.stdout.read()
        assert process.wait(timeout=10) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        process.stdout.close()
        process.stderr.close()
    return bytes(data)


def check_recovery_report(log: Log, directory: Path) -> int:
    """The report of the open that just happened; returns the torn bytes it cut."""
    report = log.recovery
    segment_files = sorted(p for p in os.listdir(directory) if p.endswith(".log"))
    assert all(len(p) == NAME_DIGITS + 4 for p in segment_files), segment_files
    if report.segment_count == 0:
        # A brand-new log (the child was killed before it created one).
        assert report == (0, 0, 0) and log.next_offset == 0
        return 0
    assert report.segment_count == log.segment_count == len(segment_files), (report, log)
    assert 0 <= report.truncated_bytes <= report.scanned_bytes, report
    # Recovery scans the segments after the newest confirmed one. Under `always`
    # a group rolls at most once before the sync that confirms the roll, so a kill
    # leaves at most the newest sealed segment unconfirmed besides the active one.
    sizes = [(directory / name).stat().st_size for name in segment_files]
    scanned = report.scanned_bytes - report.truncated_bytes
    assert scanned in (sizes[-1], sum(sizes[-2:])), (report, sizes[-2:])
    return report.truncated_bytes


def check_log(
    log: Log,
    directory: Path,
    verify_from: int,
    acked: dict[int, tuple[int, int]],
) -> int:
    """Read [verify_from, next_offset): dense, self-consistent, acked records exact."""
    assert log.log_start_offset == 0
    next_offset = log.next_offset
    bases = [base for base, *_ in log.segment_summaries()]
    assert bases == sorted(set(bases)) and bases[0] == 0 and bases[-1] <= next_offset
    # No bytes beyond what the log holds: recovery cut every torn byte.
    on_disk = sum(
        (directory / name).stat().st_size
        for name in os.listdir(directory)
        if name.endswith(".log")
    )
    assert on_disk == log.size_bytes, (on_disk, log.size_bytes)
    offset = verify_from
    found = 0
    while offset < next_offset:
        records = log.read(offset, READ_BYTES)
        assert records, f"no records at {offset} below next_offset {next_offset}"
        for record in records:
            assert record.offset == offset, f"offset {record.offset} where {offset} was due"
            identity = parse_value(record.value)
            assert identity is not None, f"record {offset} has a foreign value"
            assert record.value == record_value(*identity), f"record {offset} bytes differ"
            expected = acked.get(offset)
            assert expected is None or expected == identity, (
                f"acknowledged record {offset} should be writer/seq {expected}, is {identity}"
            )
            offset += 1
            found += 1
    assert offset == next_offset
    # Nothing at or past next_offset.
    assert log.read(next_offset) == []
    with pytest.raises(OffsetOutOfRangeError):
        log.read(next_offset + 1)
    return found


@pytest.mark.slow
def test_sigkill_never_loses_acknowledged_appends(tmp_path: Path) -> None:
    seed = int(os.environ.get("LOG_CRASH_SEED", DEFAULT_SEED))
    rounds = int(os.environ.get("LOG_CRASH_ROUNDS", DEFAULT_ROUNDS))
    rng = random.Random(seed)
    directory = tmp_path / "log"
    fs = RealFileSystem()
    totals = Totals()
    # offset -> (writer_id, seq) of every record ever acknowledged (child or parent).
    acked: dict[int, tuple[int, int]] = {}
    acked_end = 0  # one past the highest acknowledged offset
    cursor_acked: list[tuple[int, int]] = []
    clean_next_offset = 0  # next_offset when the parent last closed the log
    test_started = time.monotonic()

    for round_number in range(rounds):
        assert time.monotonic() - test_started < TEST_BUDGET_S, "crash test over its budget"
        context = f"seed {seed}, round {round_number}"
        run_seconds = rng.uniform(RUN_SECONDS_MIN, RUN_SECONDS_MAX)
        early_kill = round_number % EARLY_KILL_EVERY == EARLY_KILL_EVERY - 1
        output = parse_lines(
            run_child_round(directory, round_number, rng.getrandbits(32), run_seconds, early_kill)
        )
        totals.rounds += 1
        totals.early_kills += early_kill
        totals.never_ready += output.ready_next_offset is None
        if output.ready_next_offset is not None:
            # The parent closed the log cleanly, so the child's recovery had nothing to cut.
            assert output.ready_next_offset == clean_next_offset, context
        for group in output.groups:
            assert group.base_offset >= clean_next_offset, (context, group)
            for i in range(group.count):
                offset = group.base_offset + i
                assert offset not in acked, f"{context}: offset {offset} acknowledged twice"
                acked[offset] = (group.writer_id, group.seq_first + i)
            acked_end = max(acked_end, group.base_offset + group.count)
            totals.groups_acked += 1
            totals.records_acked += group.count
        cursor_acked.extend(output.cursor_ranges)
        totals.cursor_ranges_acked += len(output.cursor_ranges)

        log = Log.open(fs, str(directory), log_config())
        try:
            torn = check_recovery_report(log, directory)
            totals.torn_bytes += torn
            totals.rounds_with_torn_tail += torn > 0
            assert log.next_offset >= max(acked_end, clean_next_offset), (
                f"{context}: next_offset {log.next_offset} but acknowledged up to {acked_end}, "
                f"clean close at {clean_next_offset}"
            )
            check_log(log, directory, clean_next_offset, acked)
            # The log takes an append after recovery; it is acknowledged like the child's.
            writer_id = round_number * WRITER_ID_STRIDE + WRITER_ID_STRIDE - 1
            next_offset = log.next_offset
            result = log.append([Record(record_value(writer_id, 0), int(time.time() * 1000))])
            log.sync()
            assert result == (next_offset, next_offset + 1), (context, result)
            acked[result.base_offset] = (writer_id, 0)
            acked_end = result.next_offset
            assert log.read(result.base_offset)[0].value == record_value(writer_id, 0)
            clean_next_offset = log.next_offset
            totals.segments = log.segment_count
        finally:
            log.close()

        cursor = CursorLog.open(fs, str(directory / CURSOR_FILE))
        try:
            for lo, hi in cursor_acked:
                assert cursor.acked.covers(lo, hi), (
                    f"{context}: acknowledged cursor range [{lo}, {hi}) lost: {cursor.acked}"
                )
            ranges = cursor.acked.ranges()
            assert not ranges or ranges[-1][1] <= clean_next_offset, (
                f"{context}: cursor acks offsets past the log's end: {ranges[-1]}"
            )
        finally:
            cursor.close()

    # A final full pass: every record from offset 0, every acknowledgement ever made.
    log = Log.open(fs, str(directory), log_config())
    try:
        assert log.recovery.truncated_bytes == 0
        assert log.next_offset == clean_next_offset
        totals.records_found = check_log(log, directory, 0, acked)
    finally:
        log.close()
    assert totals.records_found >= len(acked)

    print(
        f"\nlog crash test (seed {seed}): {totals.rounds} rounds "
        f"({totals.early_kills} timed from start, {totals.never_ready} killed before ready), "
        f"{totals.records_acked} records acknowledged in {totals.groups_acked} groups, "
        f"{totals.records_found} records found, {totals.segments} segments, "
        f"{totals.cursor_ranges_acked} cursor ranges acknowledged, "
        f"{totals.torn_bytes} torn bytes cut in {totals.rounds_with_torn_tail} rounds, "
        f"{time.monotonic() - test_started:.1f} s"
    )
