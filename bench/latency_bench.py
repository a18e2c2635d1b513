"""Paced latency, logbroker against RabbitMQ: N interleaved rounds, one node and three replicas.

`python bench/latency_bench.py` starts, per topology, the brokers once and keeps
them for every round:
- `single`: one `logbroker serve` and one private RabbitMQ node (as
  bench/amqp_bench.py starts them), a durable queue on each;
- `replicated`: three logbroker nodes (bench/cluster_processes.py) with a queue
  of `x-queue-replicas: 3` led by a node that is not the Raft leader, and a
  3-node RabbitMQ cluster (bench/rabbitmq_cluster.py) with a quorum queue; the
  client connects to each queue's leader.
Each round runs bench/amqp_bench.py's pubsub_latency workload (one producer with
confirms, paced, and one consumer with manual acks, in one client process; the
latency is publish call -> consumer callback) for `--duration-s` at each pace of
`--paces`, on logbroker and on RabbitMQ; who goes first alternates from round to
round. Before the rounds each broker gets one unrecorded run of `--warmup-s`
at the first pace (a broker's first traffic pays for lazy imports, caches and,
in logbroker, the first full garbage collection after the startup heap was
frozen). Before each run the machine is `sync`ed and given up to
`--settle-max-s` to be quiet.

Stdout: one line per run (`"bench": "latency_run"`), then one line per
topology and pace (`"bench": "latency"`): both brokers' p50/p99 per round, the
p99 ratio per round and its median, the count of rounds where logbroker's p99
<= RabbitMQ's, whether that is at least `--rounds-needed` of them, and the
machine's load during the topology. `--logbroker-only` skips RabbitMQ (then no
ratios). Every wait is bounded; every broker is stopped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pika  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script
from bench.amqp_bench import (
    BenchError,
    _queue_op,
    ensure_rabbitmq,
    logbroker_served,
    pubsub_latency,
    rabbitmq_served,
)
from bench.cluster_bench import running_cluster
from bench.cluster_processes import say
from bench.rabbitmq_cluster import rabbitmq_cluster
from bench.replicated_queue import (
    MachineLoad,
    declare_replicated,
    delete_queue,
    settle_machine,
    wait_all_in_sync,
)
from bench.replication_bench import rabbitmq_target

Result = dict[str, Any]
# A target: a broker's name and the AMQP URL and queue to measure on.
Target = tuple[str, str, str]
TOPOLOGIES = ("single", "replicated")


@contextlib.contextmanager
def single_targets(args: argparse.Namespace) -> Iterator[list[Target]]:
    """One logbroker node and, unless --logbroker-only, one RabbitMQ node."""
    with contextlib.ExitStack() as stack:
        urls = [("logbroker", stack.enter_context(logbroker_served()))]
        if not args.logbroker_only:
            urls.append(("rabbitmq", stack.enter_context(rabbitmq_served())))
        targets = []
        for name, url in urls:
            queue = f"latency-bench-{name}-{uuid.uuid4().hex[:8]}"
            _queue_op(url, queue, delete=False)
            stack.callback(_delete_quietly, url, queue)
            targets.append((name, url, queue))
        yield targets


def _delete_quietly(url: str, queue: str) -> None:
    with contextlib.suppress(Exception):
        _queue_op(url, queue, delete=True)


@contextlib.contextmanager
def replicated_targets(args: argparse.Namespace) -> Iterator[list[Target]]:
    """Three logbroker nodes with a 3-replica queue and, unless --logbroker-only, a
    3-node RabbitMQ cluster with a quorum queue; each measured through its leader."""
    with contextlib.ExitStack() as stack:
        cluster = stack.enter_context(running_cluster(args))
        controller = cluster.wait_stable(args.stable_timeout_s)
        leader = next(node for node in cluster.nodes if node.name != controller)
        queue = declare_replicated(leader, "latency", args.timeout_s)
        stack.callback(delete_queue, leader, queue)
        wait_all_in_sync(cluster, queue, args.stable_timeout_s)
        targets = [("logbroker", leader.amqp_url, queue)]
        if not args.logbroker_only:
            nodes = stack.enter_context(rabbitmq_cluster(len(cluster.nodes)))
            url, rabbit_queue, delete = rabbitmq_target(nodes, args)()
            stack.callback(delete)
            targets.append(("rabbitmq", url, rabbit_queue))
        yield targets


def run_round(targets: list[Target], topology: str, round_index: int,
              args: argparse.Namespace) -> list[Result]:
    """Every pace on every target; the first target alternates between rounds."""
    order = targets if round_index % 2 == 0 else list(reversed(targets))
    runs = []
    for pace in args.paces:
        for name, url, queue in order:
            settled_s = settle_machine(args.settle_max_s)
            say(f"{topology} round {round_index + 1}/{args.rounds}: {name} at {pace:g} msg/s")
            result = pubsub_latency(url, queue, args, pace)
            if result["nacked"] or result["messages"] < result["sent"]:
                raise BenchError(f"{name} lost or nacked messages: {result}")
            run = {"bench": "latency_run", "topology": topology, "round": round_index + 1,
                   "target": name, "pace_msg_s": pace, "settled_s": settled_s,
                   "load_avg_1m": round(_load_1m(), 2),
                   **{key: result[key] for key in ("p50_ms", "p99_ms", "max_ms", "messages",
                                                   "msg_s")}}
            print(json.dumps(run), flush=True)
            runs.append(run)
    return runs


def warm_up(targets: list[Target], args: argparse.Namespace) -> None:
    """One unrecorded run per broker, at the first pace."""
    if args.warmup_s <= 0:
        return
    warm_args = argparse.Namespace(**{**vars(args), "duration_s": args.warmup_s})
    for name, url, queue in targets:
        say(f"warm-up: {name} for {args.warmup_s:g} s")
        pubsub_latency(url, queue, warm_args, args.paces[0])


def _load_1m() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def summarize(runs: list[Result], topology: str, pace: float, rounds_needed: int,
              machine: Result) -> Result:
    """One topology and pace: both brokers' figures by round, and the comparison."""
    by_target: dict[str, dict[str, list[float]]] = {}
    for run in runs:
        if run["topology"] == topology and run["pace_msg_s"] == pace:
            figures = by_target.setdefault(run["target"], {"p50_ms": [], "p99_ms": []})
            figures["p50_ms"].append(run["p50_ms"])
            figures["p99_ms"].append(run["p99_ms"])
    summary: Result = {"bench": "latency", "topology": topology, "pace_msg_s": pace,
                       "rounds": len(by_target.get("logbroker", {}).get("p99_ms", [])),
                       **by_target}
    if "rabbitmq" in by_target:
        ours, theirs = by_target["logbroker"]["p99_ms"], by_target["rabbitmq"]["p99_ms"]
        ratios = [round(a / max(b, 1e-9), 3) for a, b in zip(ours, theirs, strict=True)]
        met = sum(ratio <= 1.0 for ratio in ratios)
        summary.update({
            "p99_ratio": ratios, "p99_ratio_median": round(statistics.median(ratios), 3),
            "p50_ratio_median": round(statistics.median(
                a / max(b, 1e-9) for a, b in zip(by_target["logbroker"]["p50_ms"],
                                                 by_target["rabbitmq"]["p50_ms"],
                                                 strict=True)), 3),
            "rounds_logbroker_p99_le_rabbitmq": met,
            "target_met": met >= rounds_needed})
    summary["machine"] = machine
    return summary


def run_topology(topology: str, args: argparse.Namespace) -> list[Result]:
    load = MachineLoad()
    opened: Callable[[argparse.Namespace], contextlib.AbstractContextManager[list[Target]]]
    opened = single_targets if topology == "single" else replicated_targets
    runs: list[Result] = []
    with opened(args) as targets:
        say(f"{topology}: " + ", ".join(f"{name} queue {queue} at {url.split('@')[-1]}"
                                         for name, url, queue in targets))
        warm_up(targets, args)
        for round_index in range(args.rounds):
            runs.extend(run_round(targets, topology, round_index, args))
    machine = load.report()
    return [summarize(runs, topology, pace, args.rounds_needed, machine)
            for pace in args.paces]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--rounds", type=int, default=10, help="interleaved rounds per topology (default 10)")
    add("--rounds-needed", type=int,
        help="rounds with logbroker's p99 <= RabbitMQ's for the target (default: 9 of 10)")
    add("--paces", default="1000,2000", help="producer paces, msg/s (default 1000,2000)")
    add("--topologies", default=",".join(TOPOLOGIES),
        help=f"comma-separated, of {', '.join(TOPOLOGIES)} (default both)")
    add("--duration-s", type=float, default=10.0, help="length of each run (default 10)")
    add("--warmup-s", type=float, default=3.0,
        help="an unrecorded run per broker before the rounds (default 3; 0: none)")
    add("--settle-max-s", type=float, default=5.0,
        help="before each run, sync and wait up to this long for a quiet machine (default 5)")
    add("--logbroker-only", action="store_true", help="no RabbitMQ, no ratios")
    for flag, default in (("body-bytes", 1024), ("confirm-window", 500), ("prefetch", 100),
                          ("ack-every", 1)):
        add(f"--{flag}", type=int, default=default, help=f"default {default}")
    add("--stable-timeout-s", type=float, default=90.0,
        help="bound on the cluster settling and the replicas getting in sync")
    add("--start-timeout-s", type=float, default=120.0, help="bound on a cluster's start")
    add("--timeout-s", type=float, default=120.0, help="bound on each other step")
    add("--keep-dir", action="store_true", help="keep the cluster's temp dir and node logs")
    args = parser.parse_args(argv)
    try:
        args.paces = [float(pace) for pace in args.paces.split(",") if pace.strip()]
    except ValueError:
        parser.error("--paces must be numbers separated by commas")
    args.topologies = [name.strip() for name in args.topologies.split(",") if name.strip()]
    unknown = set(args.topologies) - set(TOPOLOGIES)
    if unknown or not args.topologies:
        parser.error(f"--topologies: unknown {sorted(unknown)}; known: {', '.join(TOPOLOGIES)}")
    if not args.paces or min(args.paces) <= 0:
        parser.error("--paces needs paces > 0 (a latency benchmark is paced)")
    if args.rounds < 1 or args.duration_s <= 0:
        parser.error("--rounds must be >= 1 and --duration-s > 0")
    if args.rounds_needed is None:
        args.rounds_needed = -(-9 * args.rounds // 10)  # 9 of 10, rounded up
    if not 1 <= args.rounds_needed <= args.rounds:
        parser.error("--rounds-needed must be between 1 and --rounds")
    if args.body_bytes < 8 or not 1 <= args.ack_every <= args.prefetch:
        parser.error("--body-bytes must be >= 8 and --ack-every between 1 and --prefetch")
    args.rate = args.paces[0]  # what amqp_bench's workload reads when given no pace
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.logbroker_only:
        ensure_rabbitmq()
    try:
        for topology in args.topologies:
            for summary in run_topology(topology, args):
                print(json.dumps(summary), flush=True)
    except (BenchError, pika.exceptions.AMQPError, httpx.HTTPError, OSError) as error:
        say(f"failed: {error!r}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
