"""Replication benchmark: replicated queue throughput, failover and catch-up on 3 local nodes.

`python bench/replication_bench.py` starts three `python -m logbroker serve` nodes on
free 127.0.0.1 ports (bench/cluster_processes.py, as `bench/cluster_bench.py` does) and
prints one JSON line (progress on stderr):
- throughput: a fresh durable queue with `x-queue-replicas: 3`, led by a node that is
  not the Raft leader (`x-queue-leader-locator: client-local`), gets `--messages`
  persistent messages of `--body-bytes` with publisher confirms (`--confirm-window`
  unconfirmed), then they are consumed (`--prefetch`, one ack per message), with
  bench/amqp_bench.py's workloads, the client connected to the queue's leader. With
  `--compare-rabbitmq` a 3-node RabbitMQ cluster (bench/rabbitmq_cluster.py) runs the
  same on a quorum queue (`x-queue-type: quorum`) through its leader; logbroker and
  RabbitMQ trials alternate `--trials` times, each on a new queue, the best of each
  counts, and the RabbitMQ nodes are stopped before the next phases;
- failover (bench/replication_failover.py): `--rounds` kills -9 of the queue's leader
  while a publisher with confirms on another node keeps publishing; kill -> next
  confirmed publish, p50 / p99;
- catch-up (bench/replication_catchup.py): a follower misses `--catch-up-messages`,
  then its catch-up rate, the publish rate during it vs just before, and the
  leader's RSS.
Every wait is bounded; every node is stopped (SIGKILL at the latest) at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pika  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.amqp_bench import BenchError, consume, publish_confirm
from bench.cluster_bench import _bounded, running_cluster
from bench.cluster_processes import NODE_COUNT, Cluster, say
from bench.rabbitmq_cluster import RabbitNode, quorum_leader, rabbitmq_cluster
from bench.replicated_queue import (
    REPLICAS,
    MachineLoad,
    declare_replicated,
    delete_queue,
    settle_machine,
    wait_all_in_sync,
)
from bench.replication_catchup import run_catch_up
from bench.replication_failover import run_failover

Result = dict[str, Any]
Target = Callable[[], tuple[str, str, Callable[[], None]]]  # -> (url, queue, delete)


def _workloads(url: str, queue: str, args: argparse.Namespace) -> Result:
    published = publish_confirm(url, queue, args)
    if published["messages"] != args.messages or published["nacked"]:
        raise BenchError(f"publish to {queue}: {published}")
    consumed = consume(url, queue, args.messages, args)
    if consumed["messages"] != args.messages:
        raise BenchError(f"consume from {queue}: {consumed}")
    return {"publish_msg_s": published["msg_s"], "consume_msg_s": consumed["msg_s"],
            "publish_s": published["seconds"], "consume_s": consumed["seconds"]}


def logbroker_target(cluster: Cluster, args: argparse.Namespace) -> Target:
    def prepare() -> tuple[str, str, Callable[[], None]]:
        controller = cluster.wait_stable(args.stable_timeout_s)
        leader = next(node for node in cluster.nodes if node.name != controller)
        queue = declare_replicated(leader, "throughput", args.timeout_s)
        wait_all_in_sync(cluster, queue, args.stable_timeout_s)
        return leader.amqp_url, queue, lambda: delete_queue(leader, queue)
    return prepare


def rabbitmq_target(nodes: list[RabbitNode], args: argparse.Namespace) -> Target:
    def prepare() -> tuple[str, str, Callable[[], None]]:
        queue = f"replication-bench-quorum-{uuid.uuid4().hex[:10]}"
        first = nodes[0]

        def declare(delete: bool) -> None:
            parameters = pika.URLParameters(first.url)
            parameters.socket_timeout = 10.0
            with contextlib.closing(pika.BlockingConnection(parameters)) as connection:
                channel = connection.channel()
                if delete:
                    channel.queue_delete(queue)
                else:
                    channel.queue_declare(queue, durable=True,
                                          arguments={"x-queue-type": "quorum"})

        _bounded(lambda: declare(False), args.timeout_s, f"declare quorum queue {queue}")
        leader_name = quorum_leader(first, queue, len(nodes))
        leader = next(node for node in nodes if node.name == leader_name)

        def delete() -> None:
            with contextlib.suppress(Exception):
                _bounded(lambda: declare(True), args.timeout_s, f"delete {queue}")
        return leader.url, queue, delete
    return prepare


def run_throughput(targets: dict[str, Target], args: argparse.Namespace) -> Result:
    trials: dict[str, list[Result]] = {name: [] for name in targets}
    for trial in range(args.trials):
        for name, prepare in targets.items():
            url, queue, delete = prepare()
            say(f"trial {trial + 1}/{args.trials} {name}: {args.messages} messages "
                f"to {queue} via {url.split('@')[-1]}")
            settled_s = settle_machine(args.settle_max_s)
            try:
                trials[name].append({**_workloads(url, queue, args), "settled_s": settled_s})
            finally:
                delete()
            say(f"  {trials[name][-1]}")
    result: Result = {}
    for name, runs in trials.items():
        prefix = "" if name == "logbroker" else f"{name}_"
        for op in ("publish", "consume"):
            result[f"{prefix}{op}_msg_s"] = max(float(run[f"{op}_msg_s"]) for run in runs)
    if "rabbitmq" in trials:
        for op in ("publish", "consume"):
            result[f"ratio_{op}"] = round(
                result[f"{op}_msg_s"] / max(result[f"rabbitmq_{op}_msg_s"], 1e-9), 3)
    result["throughput_trials"] = trials
    return result


def _targets(result: Result) -> dict[str, bool | None]:
    ratio = result.get("ratio_publish")
    return {"publish_confirm_ge_1x_rabbitmq_quorum": None if ratio is None else ratio >= 1.0,
            "failover_p50_under_1s": result["failover_ms_p50"] < 1000.0,
            "publish_during_catch_up_ge_0_7x": result["publish_during_catch_up_ratio"] >= 0.7,
            "leader_rss_growth_under_50_mib": result["leader_rss_growth_mib"] < 50.0}


def run_all(args: argparse.Namespace, result: Result) -> None:
    with running_cluster(args) as cluster:
        targets = {"logbroker": logbroker_target(cluster, args)}
        with contextlib.ExitStack() as rabbit:
            if args.compare_rabbitmq:
                nodes = rabbit.enter_context(rabbitmq_cluster(NODE_COUNT))
                targets["rabbitmq"] = rabbitmq_target(nodes, args)
            result.update(run_throughput(targets, args))
        say(f"failover: {args.rounds} rounds")
        result.update(run_failover(cluster, args))
        say(f"catch-up of {args.catch_up_messages} messages")
        result.update(run_catch_up(cluster, args))
    result["node_log_error_lines"] = {
        name: len(lines) for name, lines in cluster.problems.items()}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    for flag, default, text in (
            ("messages", 20_000, "messages per throughput trial"),
            ("trials", 3, "throughput trials per broker, alternating (best counts)"),
            ("body-bytes", 1024, "message size"),
            ("confirm-window", 500, "unconfirmed publishes at most"),
            ("prefetch", 100, "consumer prefetch"),
            ("ack-every", 1, "ack with multiple=True every N deliveries (1: each)"),
            ("rounds", 20, "failover rounds (kill -9 of the queue leader)"),
            ("catch-up-messages", 1_000_000, "messages the stopped follower misses"),
            ("catch-up-batch", 1000, "messages per REST publish-batch request"),
            ("catch-up-clients", 4, "publish-batch requests in flight")):
        add(f"--{flag}", type=int, default=default, help=f"{text} (default {default})")
    add("--compare-duration-s", type=float, default=10.0,
        help="publish+confirm time without and during the catch-up (default 10)")
    add("--settle-max-s", type=float, default=30.0,
        help="before each throughput trial, sync and wait up to this long for a quiet "
             "machine (default 30)")
    add("--compare-rabbitmq", action="store_true",
        help="also run the throughput trials on a 3-node RabbitMQ cluster (quorum queue)")
    add("--failover-timeout-s", type=float, default=30.0, help="bound on one failover")
    add("--stable-timeout-s", type=float, default=90.0,
        help="bound on a restarted node rejoining / replicas getting in sync")
    add("--start-timeout-s", type=float, default=120.0, help="bound on the cluster's start")
    add("--catch-up-timeout-s", type=float, default=900.0,
        help="bound on the bulk publish and on the catch-up")
    add("--timeout-s", type=float, default=300.0, help="bound on each other workload")
    add("--keep-dir", action="store_true", help="keep the temp dir with the node logs")
    args = parser.parse_args(argv)
    if min(args.messages, args.trials, args.rounds, args.catch_up_messages,
           args.catch_up_batch, args.catch_up_clients, args.confirm_window) < 1:
        parser.error("counts must be >= 1")
    if args.body_bytes < 8 or not 1 <= args.ack_every <= args.prefetch:
        parser.error("--body-bytes must be >= 8 and --ack-every between 1 and --prefetch")
    if args.catch_up_batch > 10_000 or args.compare_duration_s <= 0:
        parser.error("--catch-up-batch must be <= 10000, --compare-duration-s > 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started, load = time.monotonic(), MachineLoad()
    result: Result = {"bench": "replication"}
    try:
        run_all(args, result)
    except (BenchError, pika.exceptions.AMQPError, httpx.HTTPError, OSError,
            subprocess.SubprocessError) as error:
        say(f"failed: {error!r}")
        return 1
    result["targets"] = _targets(result)
    result["machine"] = load.report()
    result["params"] = {key: getattr(args, key) for key in (
        "messages", "trials", "body_bytes", "confirm_window", "prefetch", "ack_every",
        "rounds", "catch_up_messages", "catch_up_batch", "catch_up_clients",
        "compare_duration_s", "compare_rabbitmq")} | {
        "nodes": NODE_COUNT, "replicas": REPLICAS, "seconds": round(time.monotonic() - started, 1)}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
