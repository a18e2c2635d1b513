"""`logbroker serve --workers 1` against `--workers 2` in the same run (issue 28).

`python bench/workers_bench.py` starts, for each round and each worker count
(the order alternating between rounds), a fresh node on free 127.0.0.1 ports,
declares `--queues` durable queues (`balanced` leader locator, so they spread
over the workers), and runs `--clients` client processes that each publish
(persistent, confirms, `--confirm-window`) and consume (manual acks) on their
share of the queues at once, `--messages` per queue, connecting to the node's
one AMQP port (SO_REUSEPORT spreads the connections over the workers; a
queue led by another worker is reached through the cluster link). One JSON
line per trial: msg/s (every message published and consumed, over the wall
time) and the broker's CPU per message (user + system of every broker
process, from /proc); then one summary line per worker count with the
medians, and one with the ratios (2 workers / 1 worker).

`--pin split` puts the broker on the last CPU and the clients on the others
(`os.sched_setaffinity`): on a 2-core machine that leaves the 2 workers one
core between them, so it measures what the second worker costs, not what it
gains; `--pin none` (default) lets the kernel share every core between
broker and clients. What a machine with cores to spare would gain is what
`--pin split` cannot show on 2 cores; the summary line says which mode ran.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pika  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script
from bench.amqp_bench import _Consumer, _Publisher, _Run
from bench.free_ports import free_port, free_port_run

START_TIMEOUT_S, STOP_TIMEOUT_S, TRIAL_TIMEOUT_S = 60.0, 30.0, 300.0
MAX_ROUNDS, MAX_MESSAGES = 10, 1_000_000
Result = dict[str, Any]


def _say(message: str) -> None:
    print(f"[workers-bench] {message}", file=sys.stderr, flush=True)


def cpu_s(pid: int) -> float:
    """The process's user + system CPU seconds so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def broker_pids(root: int) -> list[int]:
    """`root` and its children (a supervisor's workers)."""
    pids = [root]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == root:
                    pids.append(int(entry))
    return pids


@contextlib.contextmanager
def served(workers: int, workdir: str, pin: str) -> Iterator[tuple[int, list[int]]]:
    """A node with `workers` workers; yields its AMQP port and its processes."""
    os.makedirs(workdir, exist_ok=True)
    amqp_port, http_port = free_port(), free_port()
    command = [sys.executable, "-m", "logbroker", "serve", "--workers", str(workers),
               "--data-dir", os.path.join(workdir, f"data-{workers}"), "--host", "127.0.0.1",
               "--amqp-port", str(amqp_port), "--http-port", str(http_port)]
    if workers > 1:
        command += ["--cluster-port", str(free_port_run(workers)), "--node-name", "bench"]
    env = {**os.environ, "LOGBROKER_CLUSTER_SECRET": "workers-bench"}
    log = open(os.path.join(workdir, f"serve-{workers}.log"), "ab")  # noqa: SIM115
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                               start_new_session=True)
    try:
        _wait_ready(http_port, workers, process)
        pids = broker_pids(process.pid)
        if pin == "split":
            for pid in pids:
                os.sched_setaffinity(pid, {_cpus()[-1]})
        yield amqp_port, pids
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def _wait_ready(http_port: int, workers: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the node exited with {process.returncode} at start")
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            status = httpx.get(f"http://127.0.0.1:{http_port}/api/cluster",
                               auth=("guest", "guest"), timeout=2).json()
            nodes = status["nodes"]
            if len(nodes) == workers and all(n["status"] == "up" for n in nodes):
                return
        time.sleep(0.2)
    raise RuntimeError(f"the node with {workers} workers was not ready in {START_TIMEOUT_S} s")


def _cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def declare(amqp_port: int, queues: list[str]) -> None:
    connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp_port))
    try:
        channel = connection.channel()
        for queue in queues:
            channel.queue_declare(queue, durable=True,
                                  arguments={"x-queue-leader-locator": "balanced"})
    finally:
        connection.close()


def client(job: tuple[str, list[str], int, dict[str, Any], str]) -> tuple[int, float, float]:
    """One client process: a publisher and a consumer per queue on one IOLoop; returns
    the messages consumed, and when it started and finished (CLOCK_MONOTONIC, which
    every process on the machine shares)."""
    url, queues, per_queue, options, pin = job
    if pin == "split" and len(_cpus()) > 1:
        os.sched_setaffinity(0, set(_cpus()[:-1]))
    args = argparse.Namespace(**options)
    run = _Run(url, TRIAL_TIMEOUT_S)
    consumers: list[_Consumer] = []

    def check() -> None:
        if all(c.received >= per_queue for c in consumers):
            for consumer in consumers:
                consumer.ack_pending()
            run.finish()

    for queue in queues:
        consumer = _Consumer(run, queue, args, check)
        consumers.append(consumer)
        publisher = _Publisher(run, queue, args, per_queue, 0.0, lambda: None)
        consumer.start(publisher.start)
    started = time.monotonic()
    run.run()
    return sum(c.received for c in consumers), started, time.monotonic()


def trial(workers: int, args: argparse.Namespace, workdir: str) -> Result:
    queues = [f"wq{index}" for index in range(args.queues)]
    with served(workers, workdir, args.pin) as (amqp_port, pids):
        declare(amqp_port, queues)
        url = f"amqp://guest:guest@127.0.0.1:{amqp_port}/%2F"
        options = {"confirm_window": args.confirm_window, "body_bytes": args.body_bytes,
                   "prefetch": args.prefetch, "ack_every": 1}
        jobs = [(url, queues[k::args.clients], args.messages, options, args.pin)
                for k in range(args.clients) if queues[k::args.clients]]
        before = sum(cpu_s(pid) for pid in pids)
        with multiprocessing.get_context("spawn").Pool(len(jobs)) as pool:
            answers = pool.map(client, jobs)
        cpu = sum(cpu_s(pid) for pid in pids) - before  # the pool's start is idle time here
        received = sum(answer[0] for answer in answers)
        elapsed = max(a[2] for a in answers) - min(a[1] for a in answers)
    return {"bench": "workers", "workers": workers, "queues": args.queues,
            "clients": args.clients, "messages": received, "seconds": round(elapsed, 3),
            "msg_s": round(received / elapsed, 1),
            "broker_cpu_us_per_msg": round(cpu * 1e6 / max(received, 1), 2),
            "broker_cpu_s": round(cpu, 3), "pin": args.pin, "cpus": len(_cpus())}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queues", type=int, default=16)
    parser.add_argument("--clients", type=int, default=4, help="client processes")
    parser.add_argument("--messages", type=int, default=2000, help="per queue")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--confirm-window", type=int, default=64)
    parser.add_argument("--prefetch", type=int, default=100)
    parser.add_argument("--pin", choices=("none", "split"), default="none")
    args = parser.parse_args(argv)
    if not 1 <= args.rounds <= MAX_ROUNDS:
        parser.error(f"--rounds must be in 1..{MAX_ROUNDS}")
    if not 1 <= args.queues * args.messages <= MAX_MESSAGES:
        parser.error(f"--queues x --messages must be in 1..{MAX_MESSAGES}")
    if args.clients < 1 or args.body_bytes < 8:
        parser.error("--clients must be >= 1 and --body-bytes >= 8")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results: dict[int, list[Result]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory(prefix="workers-bench-") as workdir:
        for round_index in range(args.rounds):
            order = (1, 2) if round_index % 2 == 0 else (2, 1)
            for workers in order:
                _say(f"round {round_index + 1}: {workers} worker(s)")
                result = trial(workers, args, os.path.join(workdir, f"r{round_index}"))
                results[workers].append(result)
                print(json.dumps(result), flush=True)
    medians = {workers: {key: statistics.median(r[key] for r in runs)
                         for key in ("msg_s", "broker_cpu_us_per_msg")}
               for workers, runs in results.items()}
    for workers, figures in medians.items():
        print(json.dumps({"bench": "workers_summary", "workers": workers, **figures,
                          "rounds": args.rounds, "pin": args.pin}), flush=True)
    print(json.dumps({
        "bench": "workers_ratio", "pin": args.pin, "cpus": len(_cpus()),
        "msg_s_ratio_2_over_1": round(medians[2]["msg_s"] / medians[1]["msg_s"], 3),
        "cpu_per_msg_ratio_2_over_1": round(
            medians[2]["broker_cpu_us_per_msg"] / medians[1]["broker_cpu_us_per_msg"], 3),
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
