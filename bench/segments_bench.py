"""Storage benchmark for the segment log: append, read, group commit, recovery, memory.

Run `python bench/segments_bench.py`; it prints ONE JSON line on stdout (progress
goes to stderr). Every figure is measured in the same run, on the same disk:

- append vs a raw sequential write of the same bytes, run alternately for
  `--rounds` rounds with `os.sync()` before every trial, medians reported;
- sequential read of the log written by each append trial (from the page cache);
- group commit under `always` (64 submitters) vs a raw write+fsync loop, on the
  event loop `logbroker serve` runs (uvloop when installed; `--event-loop`);
- recovery (`Log.open`) after an unclean stop of a child that built the log;
- the RSS of a fresh child that opens the big log and reads three offsets.

`--crc-copy-ab` runs only an A/B of the CRC computed while copying (the C encoder's
`encode_batch`) against the `crc32c` package checksumming afterwards: log trials
of `--append-mib` each, `--rounds` rounds alternating which side goes first,
in one process (it switches `record_columns`' C batch encoder off and on).

Hidden modes used for the child processes: `--build DIR MIB`, `--rss-probe DIR`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from logbroker.event_loop import EVENT_LOOPS, resolve_event_loop, run_on
from logbroker.queue.fsync_policy import FsyncPolicy
from logbroker.queue.group_commit import GroupCommitter
from segments import record_columns
from segments.filesystem import RealFileSystem
from segments.log import AppendResult, Log, LogConfig
from segments.record_batch import Record, encode_batch, encode_batch_parts

RECORD_BYTES = 1024
BATCH_RECORDS = 100
POOL_BATCHES = 16  # distinct pre-built batches, cycled through by the append loops
GROUP_COMMIT_TASKS = 64
FSYNC_WRITE_BYTES = 4096
READ_MAX_BYTES = 1 << 20
MIB = 1 << 20
MB = 1_000_000  # throughput figures are in MB/s (10**6 bytes per second)
MAX_OPS = 50_000_000  # hard cap on the iterations of any timed loop
CHILD_TIMEOUT_S = 1800


def _say(message: str) -> None:
    print(f"[segments-bench] {message}", file=sys.stderr, flush=True)


def _batch_pool(seed: int = 7) -> list[list[Record]]:
    """Batches of 1 KiB records with random values (incompressible, like real payloads)."""
    rng = random.Random(seed)
    now_ms = int(time.time() * 1000)
    return [
        [Record(rng.randbytes(RECORD_BYTES), now_ms + i) for i in range(BATCH_RECORDS)]
        for _ in range(POOL_BATCHES)
    ]


def _batches_for(mib: float, batch_bytes: int) -> int:
    return max(1, round(mib * MIB / batch_bytes))


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


# ------------------------------------------------------------ append / raw / read


def _raw_trial(directory: str, chunk: bytes, count: int) -> float:
    """Seconds to write `count` chunks sequentially with plain Python file I/O."""
    path = os.path.join(directory, "raw-trial.bin")
    started = time.perf_counter()
    with open(path, "wb") as file:
        for _ in range(count):
            file.write(chunk)
    elapsed = time.perf_counter() - started
    os.remove(path)
    return elapsed


def _read_all(log: Log) -> int:
    """Read the whole log front to back with 1 MiB reads; return the value bytes seen."""
    offset, end = log.log_start_offset, log.next_offset
    value_bytes = 0
    for _ in range(end - offset + 1):  # every read returns at least one record
        if offset >= end:
            break
        records = log.read(offset, max_bytes=READ_MAX_BYTES)
        if not records:
            break
        value_bytes += sum(len(record.value) for record in records)
        offset = records[-1].offset + 1
    return value_bytes


def _log_trial(directory: str, pool: list[list[Record]], count: int) -> tuple[float, float, int]:
    """(append seconds, read seconds, value bytes read) for `count` batches appended."""
    log_dir = os.path.join(directory, "log-trial")
    log = Log.open(RealFileSystem(), log_dir)
    try:
        started = time.perf_counter()
        for i in range(count):
            log.append(pool[i % len(pool)])
        append_s = time.perf_counter() - started
        started = time.perf_counter()
        value_bytes = _read_all(log)
        read_s = time.perf_counter() - started
    finally:
        log.close()
    shutil.rmtree(log_dir)
    return append_s, read_s, value_bytes


def _set_crc_while_copying(enabled: bool) -> None:
    """The A/B switch: the C encoder checksums while copying, or the `crc32c` package
    checksums the payload afterwards (what compressed batches always do)."""
    record_columns._c_encode_batch = _C_ENCODE_BATCH if enabled else None


_C_ENCODE_BATCH = record_columns._c_encode_batch


def _crc_ab_trial(directory: str, pool: list[list[Record]], count: int
                  ) -> tuple[float, float, float, int]:
    """(append wall s, append CPU s, read wall s, value bytes read) of one log trial."""
    log_dir = os.path.join(directory, "crc-ab-trial")
    log = Log.open(RealFileSystem(), log_dir)
    try:
        started, started_cpu = time.perf_counter(), time.process_time()
        for i in range(count):
            log.append(pool[i % len(pool)])
        append_s, append_cpu_s = time.perf_counter() - started, time.process_time() - started_cpu
        started = time.perf_counter()
        value_bytes = _read_all(log)
        read_s = time.perf_counter() - started
    finally:
        log.close()
    shutil.rmtree(log_dir)
    return append_s, append_cpu_s, read_s, value_bytes


def _encode_cpu_s(pool: list[list[Record]], count: int) -> float:
    """CPU seconds to encode `count` batches (no I/O): what the C CRC path changes."""
    started = time.process_time()
    for i in range(count):
        encode_batch_parts(i * BATCH_RECORDS, pool[i % len(pool)])
    return time.process_time() - started


def bench_crc_copy_ab(directory: str, mib: float, rounds: int) -> dict[str, Any]:
    """Log trials with the CRC computed while copying ("on") and without ("off"),
    alternating which goes first each round. Reported: medians of append MB/s (wall
    and per CPU second), read MB/s, encode µs per batch, the per-round gains of
    "on" over "off" and how many rounds "on" won."""
    pool = _batch_pool()
    chunk = encode_batch(0, pool[0])
    count = _batches_for(mib, len(chunk))
    total_bytes = count * len(chunk)
    figures: dict[str, dict[bool, list[float]]] = {
        name: {True: [], False: []} for name in ("append", "append_cpu", "read", "encode_us")}
    for round_number in range(rounds):
        for enabled in (True, False) if round_number % 2 == 0 else (False, True):
            _set_crc_while_copying(enabled)
            os.sync()
            append_s, append_cpu_s, read_s, value_bytes = _crc_ab_trial(directory, pool, count)
            figures["append"][enabled].append(total_bytes / append_s / MB)
            figures["append_cpu"][enabled].append(total_bytes / append_cpu_s / MB)
            figures["read"][enabled].append(value_bytes / read_s / MB)
            figures["encode_us"][enabled].append(_encode_cpu_s(pool, count) / count * 1e6)
        _set_crc_while_copying(True)
        _say(f"crc-copy round {round_number + 1}/{rounds}: append on "
             f"{figures['append'][True][-1]:.0f} off {figures['append'][False][-1]:.0f} MB/s, "
             f"encode on {figures['encode_us'][True][-1]:.2f} "
             f"off {figures['encode_us'][False][-1]:.2f} µs")
    result: dict[str, Any] = {"crc_ab_rounds": rounds, "crc_ab_trial_bytes": total_bytes}
    for name, by_mode in figures.items():
        on, off = by_mode[True], by_mode[False]
        # For times (µs) lower is better: the gain is off/on - 1 either way.
        gains = ([b / a - 1 for a, b in zip(on, off, strict=True)] if name == "encode_us"
                 else [a / b - 1 for a, b in zip(on, off, strict=True)])
        result[f"crc_ab_{name}_on"] = round(_median(on), 2)
        result[f"crc_ab_{name}_off"] = round(_median(off), 2)
        result[f"crc_ab_{name}_gain_median"] = round(_median(gains), 4)
        result[f"crc_ab_{name}_gain_quartiles"] = [
            round(q, 4) for q in statistics.quantiles(gains, n=4)] if len(gains) > 1 else []
        result[f"crc_ab_{name}_on_won"] = sum(gain > 0 for gain in gains)
    return result


def bench_append(directory: str, mib: float, rounds: int) -> dict[str, Any]:
    """Alternate raw and log trials of the same volume; report medians."""
    pool = _batch_pool()
    chunk = encode_batch(0, pool[0])
    count = _batches_for(mib, len(chunk))
    total_bytes = count * len(chunk)
    raw_rates: list[float] = []
    append_rates: list[float] = []
    read_rates: list[float] = []
    for round_number in range(rounds):
        os.sync()
        raw_rates.append(total_bytes / _raw_trial(directory, chunk, count) / MB)
        os.sync()
        append_s, read_s, value_bytes = _log_trial(directory, pool, count)
        append_rates.append(total_bytes / append_s / MB)
        read_rates.append(value_bytes / read_s / MB)
        _say(f"round {round_number + 1}/{rounds}: raw {raw_rates[-1]:.0f} MB/s, "
             f"append {append_rates[-1]:.0f} MB/s, read {read_rates[-1]:.0f} MB/s")
    os.sync()
    append_mb_s = _median(append_rates)
    raw_mb_s = _median(raw_rates)
    return {
        "append_mb_s": round(append_mb_s, 1),
        "append_msgs_s": round(append_mb_s * MB / len(chunk) * BATCH_RECORDS),
        "raw_write_mb_s": round(raw_mb_s, 1),
        "append_ratio": round(append_mb_s / raw_mb_s, 3),
        "read_mb_s": round(_median(read_rates), 1),
        "append_mb_s_trials": [round(rate, 1) for rate in append_rates],
        "raw_write_mb_s_trials": [round(rate, 1) for rate in raw_rates],
        "read_mb_s_trials": [round(rate, 1) for rate in read_rates],
        "batch_bytes": len(chunk),
        "trial_bytes": total_bytes,
    }


# ------------------------------------------------------------ fsync / group commit


def bench_fsync_loop(directory: str, duration_s: float) -> float:
    """fsyncs per second of a plain write-4-KiB-then-fsync loop."""
    path = os.path.join(directory, "fsync-loop.bin")
    block = os.urandom(FSYNC_WRITE_BYTES)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    done = 0
    try:
        started = time.perf_counter()
        deadline = started + duration_s
        while done < MAX_OPS and time.perf_counter() < deadline:
            os.write(fd, block)
            os.fsync(fd)
            done += 1
        elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
        os.remove(path)
    return done / elapsed


async def _group_commit_run(log: Log, duration_s: float) -> tuple[int, int, float]:
    """(messages confirmed, fsyncs, seconds) with 64 submitters looping on submit."""
    committer: GroupCommitter[Sequence[Record], AppendResult] = GroupCommitter(
        log, FsyncPolicy.parse("always")
    )
    value = random.Random(11).randbytes(RECORD_BYTES)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + duration_s
    per_task_cap = MAX_OPS // GROUP_COMMIT_TASKS

    async def submitter() -> int:
        confirmed = 0
        while confirmed < per_task_cap and loop.time() < deadline:
            await committer.submit([Record(value, int(time.time() * 1000))])
            confirmed += 1
        return confirmed

    started = time.perf_counter()
    counts = await asyncio.gather(*(submitter() for _ in range(GROUP_COMMIT_TASKS)))
    elapsed = time.perf_counter() - started
    fsyncs = committer.fsyncs
    await committer.close()
    return sum(counts), fsyncs, elapsed


def bench_group_commit(directory: str, duration_s: float, loop_name: str = "asyncio"
                       ) -> dict[str, float]:
    log_dir = os.path.join(directory, "group-commit")
    log = Log.open(RealFileSystem(), log_dir)
    try:
        messages, fsyncs, elapsed = run_on(loop_name, _group_commit_run(log, duration_s))
    finally:
        log.close()
    shutil.rmtree(log_dir)
    return {
        "group_commit_msgs_s": round(messages / elapsed, 1),
        "group_commit_fsyncs_s": round(fsyncs / elapsed, 1),
        "group_commit_avg_group": round(messages / max(fsyncs, 1), 2),
    }


# ------------------------------------------------------------ recovery / memory


def build_log(directory: str, mib: float) -> None:
    """Child mode: append `mib` MiB as a broker does, then die without closing the log.

    Appends go through a GroupCommitter with the broker's default policy
    (`always`), so rolled segments get confirmed the way they do in service;
    the stop is unclean: no close, and the process exits mid-stream.
    """
    pool = _batch_pool(seed=3)
    count = max(1, -(-round(mib * MIB) // (RECORD_BYTES * BATCH_RECORDS)))
    log = Log.open(RealFileSystem(), directory, LogConfig())

    async def append_all() -> None:
        committer: GroupCommitter[Sequence[Record], AppendResult] = GroupCommitter(
            log, FsyncPolicy.parse("always")
        )
        for i in range(count):
            await committer.submit(pool[i % len(pool)])

    asyncio.run(append_all())
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # unclean stop: no close; the OS drops the flock


def _child(args: list[str]) -> str:
    command = [sys.executable, os.path.abspath(__file__), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"child {args} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def bench_recovery(directory: str, mib: float, opens: int = 3) -> tuple[float, int]:
    """Median seconds of `Log.open` after an unclean stop, and the log's byte size."""
    _child(["--build", directory, str(mib)])
    os.sync()  # the build's dirty pages go to disk; the opens read from the page cache
    times: list[float] = []
    size = 0
    for _ in range(opens):
        started = time.perf_counter()
        log = Log.open(RealFileSystem(), directory)
        times.append(time.perf_counter() - started)
        size = log.size_bytes
        log.close()
    return _median(times), size


def rss_probe(directory: str) -> None:
    """Child mode: open the log, read first/middle/last offsets, print VmRSS in KiB."""
    log = Log.open(RealFileSystem(), directory)
    start, end = log.log_start_offset, log.next_offset
    for offset in (start, (start + end) // 2, end - 1):
        if not log.read(offset, max_bytes=READ_MAX_BYTES):
            raise RuntimeError(f"nothing read at offset {offset}")
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                print(json.dumps({"vm_rss_kib": int(line.split()[1])}))
                break
    log.close()


def bench_rss(directory: str) -> float:
    output = _child(["--rss-probe", directory]).strip().splitlines()[-1]
    return float(json.loads(output)["vm_rss_kib"]) / 1024


def bench_storage(directory: str, small_mib: float, big_mib: float) -> dict[str, float]:
    small_dir = os.path.join(directory, "recovery-small")
    big_dir = os.path.join(directory, "recovery-big")
    _say(f"recovery: building {small_mib} MiB log")
    small_s, small_bytes = bench_recovery(small_dir, small_mib)
    shutil.rmtree(small_dir)
    _say(f"recovery: building {big_mib} MiB log")
    big_s, big_bytes = bench_recovery(big_dir, big_mib)
    rss_mib = bench_rss(big_dir)
    shutil.rmtree(big_dir)
    return {
        "recovery_s_100mib": round(small_s, 4),
        "recovery_s_1gib": round(big_s, 4),
        "recovery_ratio_1gib_vs_100mib": round(big_s / small_s, 3),
        "rss_mib_1gib_open": round(rss_mib, 1),
        "recovery_small_log_bytes": small_bytes,
        "recovery_big_log_bytes": big_bytes,
    }


# ------------------------------------------------------------------- driver


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dir", default=None,
                        help="parent directory for the benchmark's temp dir (default: system tmp)")
    parser.add_argument("--append-mib", type=float, default=256.0)
    parser.add_argument("--duration-s", type=float, default=5.0)
    parser.add_argument("--big-mib", type=float, default=1024.0)
    parser.add_argument("--small-mib", type=float, default=100.0)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--event-loop", choices=EVENT_LOOPS, default="auto",
                        help="the group commit's loop (default: as logbroker serve)")
    parser.add_argument("--crc-copy-ab", action="store_true",
                        help="only the A/B of the CRC computed while copying")
    parser.add_argument("--build", nargs=2, metavar=("DIR", "MIB"), help=argparse.SUPPRESS)
    parser.add_argument("--rss-probe", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.append_mib <= 0 or args.duration_s <= 0 or args.rounds < 1:
        parser.error("--append-mib and --duration-s must be positive, --rounds at least 1")
    if not 0 < args.small_mib <= args.big_mib:
        parser.error("need 0 < --small-mib <= --big-mib")
    return args


def _targets(result: dict[str, Any]) -> dict[str, bool]:
    return {
        "append_ratio_ge_0.7": result["append_ratio"] >= 0.7,
        "group_commit_vs_fsync_ratio_ge_20": result["group_commit_vs_fsync_ratio"] >= 20,
        "recovery_ratio_le_2": result["recovery_ratio_1gib_vs_100mib"] <= 2,
        "rss_lt_100_mib": result["rss_mib_1gib_open"] < 100,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = tempfile.mkdtemp(prefix="segments-bench-", dir=args.dir)
    params = {"append_mib": args.append_mib, "duration_s": args.duration_s,
              "big_mib": args.big_mib, "small_mib": args.small_mib, "rounds": args.rounds,
              "record_bytes": RECORD_BYTES, "batch_records": BATCH_RECORDS,
              "group_commit_tasks": GROUP_COMMIT_TASKS, "workdir": workdir,
              "event_loop": resolve_event_loop(args.event_loop),
              "record_encoder": record_columns.ENCODER}
    result: dict[str, Any] = {"bench": "segments"}
    try:
        _say(f"append vs raw write: {args.rounds} rounds of {args.append_mib} MiB in {workdir}")
        result.update(bench_append(workdir, args.append_mib, args.rounds))
        os.sync()
        _say(f"fsync loop for {args.duration_s} s")
        fsyncs_per_s = bench_fsync_loop(workdir, args.duration_s)
        os.sync()
        _say(f"group commit for {args.duration_s} s")
        result.update(bench_group_commit(workdir, args.duration_s, params["event_loop"]))
        result["fsyncs_per_s"] = round(fsyncs_per_s, 1)
        result["group_commit_vs_fsync_ratio"] = round(
            result["group_commit_msgs_s"] / fsyncs_per_s, 2)
        os.sync()
        result.update(bench_storage(workdir, args.small_mib, args.big_mib))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result["params"] = params
    result["targets_met"] = _targets(result)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.build:
        build_log(args.build[0], float(args.build[1]))
        return 0  # not reached: build_log exits the process
    if args.rss_probe:
        rss_probe(args.rss_probe)
        return 0
    if args.crc_copy_ab:
        workdir = tempfile.mkdtemp(prefix="segments-bench-", dir=args.dir)
        try:
            ab = bench_crc_copy_ab(workdir, args.append_mib, args.rounds)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        print(json.dumps({"bench": "segments-crc-copy-ab", **ab}), flush=True)
        return 0
    result = run(args)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
