"""Restart benchmark: time from `logbroker serve` starting to the first message consumed,
and the broker's peak RSS while it recovers, with a backlog of N queued messages.

Run `PYTHONPATH=$PWD python bench/restart_bench.py`; progress goes to stderr and
every figure (a median over the rounds) is one JSON line on stdout, then one
summary line with the ratios of the largest backlog to the smallest, measured
in the same run (issue 28).

For each backlog size N (`--counts`):

1. a broker declares the durable queue and stops (SIGTERM);
2. the queue's log is written directly through the storage API (N persistent
   messages of `--body-bytes`, 1,000 a batch), and the meta sidecars of its
   sealed segments are written as a running broker's `SidecarWriter` does when
   it stops cleanly; building 1 M through AMQP would take minutes, 10 M an hour;
3. `serve` starts (a warm-up start, not reported), a pika client takes one
   message, the broker is stopped with SIGTERM;
4. in each of `--rounds` rounds (taking the sizes in turn) `serve` starts:
   "sigterm" is the time from `Popen` to the first message in the client's
   hands; `--settle-s` later `peak_rss_mib` is the child's VmHWM (the most it held
   at any time since it started) and `steady_rss_mib` its VmRSS (holding the backlog);
5. with that delivery still unacked the broker is killed (SIGKILL) and started
   again: the "kill9" figures.

`queue_open_s` (with "sigterm") is the queue's recovery alone, `open_queue_files`
timed in this process after the round's last SIGTERM.
`to_amqp_s` is the part of `seconds` until the AMQP port took a connection:
with a small backlog it is the process's start (the interpreter and imports,
about 1 s on a loaded 2-core machine), the floor under every figure.

Disk: N x body bytes must fit with room to spare; if it does not, the body size
of that N is lowered until it does, and the line says so (`body_bytes`).
Only 127.0.0.1 is ever contacted; every wait has a deadline.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pika  # type: ignore[import-untyped]
import pika.exceptions  # type: ignore[import-untyped]
from pamqp import commands

from bench.free_ports import free_port
from logbroker.message import Message, records_of
from logbroker.queue.queue_limits import QueueLimits
from logbroker.queue.queue_opening import open_queue_files
from logbroker.queue.queue_settings import QueueSettings
from logbroker.queue.sidecar_writer import SidecarWriter
from segments.filesystem import RealFileSystem
from segments.log import Log

QUEUE = "restart-bench"
VHOST = "/"
BATCH = 1000
START_TIMEOUT_S = 900.0
START_ATTEMPTS = 3
STOP_TIMEOUT_S = 300.0
POLL_S = 0.01
DISK_MARGIN = 1.25  # of the backlog's bytes, plus what the filesystem must keep free
RECORD_OVERHEAD_BYTES = 48  # headers and columns a 1 KiB message adds in the log
MIB = 1 << 20


def _say(message: str) -> None:
    print(f"[restart-bench] {message}", file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


@dataclass
class Broker:
    process: subprocess.Popen[bytes]
    url: str
    log_path: str


def _queue_directory(data_dir: str) -> str:
    import hashlib  # the broker's naming (Broker.queue_directory)
    digest = hashlib.sha256(f"{VHOST}\0{QUEUE}".encode()).hexdigest()[:32]
    return os.path.join(data_dir, "queues", digest)


SERVE_PYTHONPATH: str | None = None  # --serve-pythonpath: the broker under test's tree


def _start(workdir: str, amqp_port: int, http_port: int) -> Broker:
    data_dir = os.path.join(workdir, "data")
    log_path = os.path.join(workdir, "console.log")
    argv = [sys.executable, "-m", "logbroker", "serve", "--data-dir", data_dir,
            "--amqp-port", str(amqp_port), "--http-port", str(http_port),
            "--host", "127.0.0.1"]
    # One process: what restarts is one queue's node (the environment, not `--workers`:
    # an older tree under --serve-pythonpath lacks the flag).
    env, cwd = {**os.environ, "LOGBROKER_WORKERS": "1"}, None
    if SERVE_PYTHONPATH is not None:  # `-m` looks in the working directory first
        env["PYTHONPATH"] = cwd = SERVE_PYTHONPATH
    with open(log_path, "ab") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                   cwd=cwd, start_new_session=True)
    return Broker(process, f"amqp://guest:guest@127.0.0.1:{amqp_port}/%2F", log_path)


def _tail(broker: Broker) -> str:
    with open(broker.log_path, errors="replace") as log:
        return log.read()[-3000:]


def _connect(broker: Broker, deadline: float) -> pika.BlockingConnection:
    parameters = pika.URLParameters(broker.url + "?connection_attempts=1&socket_timeout=5")
    while time.monotonic() < deadline:
        if broker.process.poll() is not None:
            raise BenchError(f"broker exited {broker.process.returncode}:\n{_tail(broker)}")
        try:
            return pika.BlockingConnection(parameters)
        except pika.exceptions.AMQPError:
            time.sleep(POLL_S)
    raise BenchError(f"no AMQP at {broker.url}:\n{_tail(broker)}")


def _first_message(broker: Broker, started: float
                   ) -> tuple[float, float, pika.BlockingConnection]:
    """Seconds from `started` to an AMQP connection and to the first message got (left
    unacked), and the open connection holding it."""
    deadline = started + START_TIMEOUT_S
    connection = _connect(broker, deadline)
    connected = time.monotonic() - started
    channel = connection.channel()
    while time.monotonic() < deadline:
        method, _, body = channel.basic_get(QUEUE, auto_ack=False)
        if method is not None and body:
            return connected, time.monotonic() - started, connection
        time.sleep(POLL_S)
    raise BenchError("no message came")


def _status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise BenchError(f"no {field} for pid {pid}")


def _stop(broker: Broker, kill: bool = False) -> None:
    if broker.process.poll() is None:
        broker.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
    try:
        broker.process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _say(f"pid {broker.process.pid} did not stop; killing it")
        broker.process.kill()
        broker.process.wait(timeout=STOP_TIMEOUT_S)


@contextlib.contextmanager
def _running(workdir: str) -> Iterator[Broker]:
    broker = _start(workdir, free_port(), free_port())
    try:
        yield broker
    finally:
        _stop(broker)


def _declare(workdir: str) -> None:
    with _running(workdir) as broker:
        connection = _connect(broker, time.monotonic() + START_TIMEOUT_S)
        connection.channel().queue_declare(QUEUE, durable=True)
        connection.close()


def _build_backlog(workdir: str, count: int, body_bytes: int) -> float:
    """Append `count` persistent messages to the queue's log; return the seconds taken."""
    started = time.monotonic()
    fs = RealFileSystem()
    directory = _queue_directory(os.path.join(workdir, "data"))
    log = Log.open(fs, os.path.join(directory, "log"))
    try:
        now_ms = int(time.time() * 1000)
        template = Message("", QUEUE, b"x" * body_bytes,
                           commands.Basic.Properties(delivery_mode=2), timestamp_ms=now_ms)
        full = records_of([template] * BATCH)
        for first in range(0, count, BATCH):
            log.append_group([full[:min(BATCH, count - first)]])
        # What the broker's SidecarWriter has done by a clean stop.
        SidecarWriter(fs, directory, log, lambda action: None).finish()
    finally:
        log.close()
    return time.monotonic() - started


def _body_bytes_that_fit(workdir: str, count: int, body_bytes: int) -> int:
    free = shutil.disk_usage(workdir).free
    while body_bytes > 16 and count * (body_bytes + RECORD_OVERHEAD_BYTES) * DISK_MARGIN > free:
        body_bytes //= 2
    return body_bytes


def _measure(workdir: str, settle_s: float
             ) -> tuple[dict[str, float], Broker, pika.BlockingConnection]:
    for attempt in range(START_ATTEMPTS):
        try:
            return _measure_once(workdir, settle_s)
        except BenchError as error:
            # A port found free was taken before the broker bound it (other work on
            # the machine): the next start gets others.
            if "Address already in use" not in str(error) or attempt + 1 == START_ATTEMPTS:
                raise
            _say("a port was taken meanwhile; starting again on others")
    raise AssertionError("unreachable")


def _measure_once(workdir: str, settle_s: float
                  ) -> tuple[dict[str, float], Broker, pika.BlockingConnection]:
    started = time.monotonic()
    broker = _start(workdir, free_port(), free_port())
    try:
        connected, seconds, connection = _first_message(broker, started)
        time.sleep(settle_s)
        # The high-water mark after settling covers the whole start: the first message
        # now comes before the HTTP stack is loaded, so VmHWM read then would be below
        # the steady state and the ratio would hold trivially.
        peak = _status_kib(broker.process.pid, "VmHWM") / 1024
        steady = _status_kib(broker.process.pid, "VmRSS") / 1024
    except BaseException:
        _stop(broker, kill=True)
        raise
    return ({"seconds": round(seconds, 3), "to_amqp_s": round(connected, 3),
             "peak_rss_mib": round(peak, 1),
             "steady_rss_mib": round(steady, 1)}, broker, connection)


def _queue_open_s(workdir: str) -> float:
    """The queue's recovery alone (`open_queue_files`, as the broker opens it), in this
    process: `seconds` without the interpreter's start and the broker's other work."""
    directory = _queue_directory(os.path.join(workdir, "data"))
    settings = QueueSettings(VHOST, QUEUE, True, QueueLimits())
    started = time.perf_counter()
    opened = open_queue_files(settings, RealFileSystem(), directory, None,
                              int(time.time() * 1000))
    seconds = time.perf_counter() - started
    opened.log.close()
    opened.cursor.close()
    opened.mark.close()
    return round(seconds, 3)


def _close_quietly(connection: pika.BlockingConnection) -> None:
    with contextlib.suppress(Exception):
        connection.close()


@dataclass
class Backlog:
    count: int
    body_bytes: int
    workdir: str
    build_s: float


def prepare(base: str, count: int, body_bytes: int) -> Backlog:
    """Steps 1-3: a stopped broker whose queue holds `count` messages."""
    workdir = tempfile.mkdtemp(prefix=f"restart-bench-{count}-", dir=base)
    body_bytes = _body_bytes_that_fit(workdir, count, body_bytes)
    _say(f"{count:,} x {body_bytes} B: declaring, then writing the backlog")
    _declare(workdir)
    build_s = _build_backlog(workdir, count, body_bytes)
    _say(f"built in {build_s:.1f} s; warm-up start")
    _, broker, connection = _measure(workdir, 0.0)
    _close_quietly(connection)
    _stop(broker)
    return Backlog(count, body_bytes, workdir, build_s)


def restarts(backlog: Backlog, settle_s: float) -> dict[str, dict[str, float]]:
    """Steps 4-5: one restart after SIGTERM, one after kill -9."""
    figures: dict[str, dict[str, float]] = {}
    figures["sigterm"], broker, connection = _measure(backlog.workdir, settle_s)
    _stop(broker, kill=True)  # with one delivery unacked
    _close_quietly(connection)
    figures["kill9"], broker, connection = _measure(backlog.workdir, settle_s)
    _close_quietly(connection)
    _stop(broker)
    if SERVE_PYTHONPATH is None:  # this process's queue code is the one under test
        figures["sigterm"]["queue_open_s"] = _queue_open_s(backlog.workdir)
    _say(f"{backlog.count:,}: {figures}")
    return figures


def medians(backlog: Backlog, rounds: list[dict[str, dict[str, float]]]
            ) -> list[dict[str, Any]]:
    lines = []
    for mode in ("sigterm", "kill9"):
        line: dict[str, Any] = {"bench": "restart", "messages": backlog.count,
                                "body_bytes": backlog.body_bytes,
                                "build_s": round(backlog.build_s, 1), "mode": mode,
                                "rounds": len(rounds)}
        for key in rounds[0][mode]:
            line[key] = round(statistics.median(figures[mode][key] for figures in rounds), 3)
        lines.append(line)
    return lines


def summary(lines: list[dict[str, Any]]) -> dict[str, Any]:
    counts = sorted({line["messages"] for line in lines})
    small, large = counts[0], counts[-1]
    result: dict[str, Any] = {"bench": "restart-summary", "small": small, "large": large}
    targets: dict[str, bool] = {}
    for mode in ("sigterm", "kill9"):
        by_count = {line["messages"]: line for line in lines if line["mode"] == mode}
        ratio = by_count[large]["seconds"] / max(by_count[small]["seconds"], 1e-6)
        result[f"{mode}_seconds_ratio"] = round(ratio, 2)
        result[f"{mode}_large_seconds"] = by_count[large]["seconds"]
        peak_ratio = max(line["peak_rss_mib"] / line["steady_rss_mib"]
                         for line in by_count.values())
        result[f"{mode}_peak_over_steady_rss_max"] = round(peak_ratio, 2)
        targets[f"{mode}_ratio_le_2"] = ratio <= 2
        targets[f"{mode}_peak_rss_le_1.5x_steady"] = peak_ratio <= 1.5
    targets["sigterm_large_lt_1s"] = result["sigterm_large_seconds"] < 1.0
    opens = {line["messages"]: line["queue_open_s"] for line in lines if "queue_open_s" in line}
    if opens:
        result["queue_open_s_ratio"] = round(opens[large] / max(opens[small], 1e-6), 2)
        result["queue_open_large_s"] = opens[large]
        targets["queue_open_large_lt_1s"] = opens[large] < 1.0
    result["targets_met"] = targets
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", default="10000,1000000,10000000",
                        help="backlog sizes, comma-separated (smallest is the reference)")
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--settle-s", type=float, default=2.0,
                        help="after the first message, wait this long for steady RSS")
    parser.add_argument("--rounds", type=int, default=3,
                        help="restarts of each kind per size (medians are reported)")
    parser.add_argument("--serve-pythonpath", default=None,
                        help="run the broker from this tree (an A/B against another "
                             "checkout; the backlog is still written by this one)")
    parser.add_argument("--dir", default=None, help="where the data goes (default: a temp dir)")
    args = parser.parse_args(argv)
    global SERVE_PYTHONPATH
    SERVE_PYTHONPATH = args.serve_pythonpath
    counts = sorted(int(count) for count in args.counts.split(","))
    base = args.dir or tempfile.gettempdir()
    lines: list[dict[str, Any]] = []
    backlogs: list[Backlog] = []
    try:
        for count in counts:
            backlogs.append(prepare(base, count, args.body_bytes))
        # Rounds interleave the sizes, so a burst of load elsewhere hits them alike.
        results: list[list[dict[str, dict[str, float]]]] = [[] for _ in backlogs]
        for round_index in range(args.rounds):
            _say(f"round {round_index + 1} of {args.rounds}")
            for backlog, figures in zip(backlogs, results, strict=True):
                figures.append(restarts(backlog, args.settle_s))
        for backlog, figures in zip(backlogs, results, strict=True):
            for line in medians(backlog, figures):
                print(json.dumps(line), flush=True)
                lines.append(line)
    except BenchError as error:
        _say(f"failed: {error}")
        return 1
    finally:
        for backlog in backlogs:
            shutil.rmtree(backlog.workdir, ignore_errors=True)
    print(json.dumps(summary(lines)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
