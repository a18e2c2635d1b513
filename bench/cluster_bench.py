"""Cluster benchmark: Raft failover, declare latency and forwarding cost on 3 local nodes.

`python bench/cluster_bench.py` starts three `python -m logbroker serve` nodes (n1..n3)
on free 127.0.0.1 ports in a temp dir (data dirs, one shared secret file, logs
nI.log), then measures, with progress on stderr:
- election: `--rounds` times, find the Raft leader (`GET /api/cluster`), open an AMQP
  connection to a survivor (alternating between the two), `kill -9` the leader and at
  once `queue.declare` a fresh durable queue on that survivor (the follower retries
  until a new leader commits it; on an error the client reconnects and declares another
  fresh name). The figure is kill -> declare-ok. The killed node is then restarted with
  the same arguments and data dir, and the next round waits until every node answers
  `GET /api/cluster` with the same leader and all three nodes up and connected;
- declare latency: `--declares` sequential `queue.declare` round trips of fresh durable
  queues (each one a Raft commit), on a follower and on the Raft leader (pika
  BlockingConnection; the queues are deleted afterwards, untimed);
- forwarding: node X (a follower) leads a fresh queue (`x-queue-leader-locator:
  client-local`, declared on X, checked with `GET /api/queues`); `--messages` persistent
  messages are published with confirms (`--confirm-window` unconfirmed) and consumed
  (`--prefetch`, manual acks) with bench/amqp_bench.py's workloads, either connected
  to X ("direct") or to another node Y ("forwarded", every operation goes Y -> X).
  Direct and forwarded alternate `--trials` times, each on a new queue; the best msg/s
  of each is reported (the VM is noisy), with every trial in `trials`.
One JSON line on stdout. Every wait is bounded; every node is killed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pika  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.amqp_bench import BenchError, consume, publish_confirm
from bench.cluster_processes import AUTH, NODE_COUNT, Cluster, Node, get_json, say

Result = dict[str, Any]
T = TypeVar("T")
CLIENT_LOCAL = {"x-queue-leader-locator": "client-local"}


def _percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of `values` (any unit), rounded to 0.001."""
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))
    return round(ordered[index], 3)


def _bounded(work: Callable[[], T], timeout_s: float, what: str) -> T:
    """`work()` in a daemon thread; BenchError if it has not returned in `timeout_s`.

    pika's BlockingConnection has no timeout on a channel method, so a broker that never
    answers would hang the benchmark: the thread is abandoned instead (the nodes are
    killed at the end, which closes its socket)."""
    box: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)

    def target() -> None:
        try:
            box.put((True, work()))
        except BaseException as error:  # handed to the caller
            box.put((False, error))

    threading.Thread(target=target, name=what, daemon=True).start()
    try:
        ok, value = box.get(timeout=timeout_s)
    except queue.Empty:
        raise BenchError(f"{what}: no answer within {timeout_s:g} s") from None
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def _queue_name(prefix: str) -> str:
    return f"cluster-bench-{prefix}-{uuid.uuid4().hex[:10]}"


def _connect(node: Node) -> Any:
    parameters = pika.URLParameters(node.amqp_url)
    parameters.socket_timeout = 5.0
    parameters.stack_timeout = 10.0
    return pika.BlockingConnection(parameters)


def _close(connection: Any) -> None:
    with contextlib.suppress(Exception):
        if connection is not None and connection.is_open:
            connection.close()


# ------------------------------------------------------------------ election


def election_round(cluster: Cluster, leader: Node, survivor: Node,
                   timeout_s: float) -> tuple[float, int]:
    """kill -9 `leader`, declare on `survivor` until a declare succeeds.

    Returns (seconds from the kill to declare-ok, failed attempts before it)."""
    def run() -> tuple[float, int]:
        connection = _connect(survivor)
        channel = connection.channel()
        failures = 0
        started = time.perf_counter()
        cluster.kill9(leader)
        try:
            while True:
                try:
                    if channel is None:
                        connection = _connect(survivor)
                        channel = connection.channel()
                    channel.queue_declare(_queue_name("election"), durable=True,
                                          arguments=CLIENT_LOCAL)
                    return time.perf_counter() - started, failures
                except (pika.exceptions.AMQPError, OSError) as error:
                    failures += 1
                    say(f"  declare on {survivor.name} failed ({error!r}); reconnecting")
                    if time.perf_counter() - started > timeout_s:
                        raise BenchError(f"no declare committed {timeout_s:g} s after "
                                         f"killing {leader.name}") from error
                    _close(connection)
                    connection = channel = None
                    time.sleep(0.05)
        finally:
            _close(connection)

    return _bounded(run, timeout_s + 15.0, f"election round ({leader.name} killed)")


def run_elections(cluster: Cluster, args: argparse.Namespace) -> Result:
    elections_s: list[float] = []
    ready_s: list[float] = []
    failures = 0
    killed: list[str] = []
    for round_index in range(args.rounds):
        leader = cluster.node(cluster.wait_stable(args.stable_timeout_s))
        survivors = [node for node in cluster.nodes if node is not leader]
        survivor = survivors[round_index % len(survivors)]
        elapsed, failed = election_round(cluster, leader, survivor, args.election_timeout_s)
        cluster.reap(leader)
        elections_s.append(elapsed)
        failures += failed
        killed.append(leader.name)
        restarted = time.perf_counter()
        cluster.start(leader)
        cluster.wait_stable(args.stable_timeout_s)
        ready_s.append(time.perf_counter() - restarted)
        say(f"round {round_index + 1}/{args.rounds}: killed leader {leader.name}, declare "
             f"on {survivor.name} ok after {elapsed * 1000:.0f} ms ({failed} failed), "
             f"restarted and whole again in {ready_s[-1]:.1f} s")
    ms = [seconds * 1000 for seconds in elections_s]
    return {"election_ms_p50": _percentile(ms, 0.50), "election_ms_p99": _percentile(ms, 0.99),
            "election_ms_max": round(max(ms), 3), "election_rounds": len(ms),
            "election_ms": [round(value, 1) for value in ms],
            "election_failed_declares": failures, "killed_leaders": killed,
            "restart_ready_s_p50": _percentile(ready_s, 0.50),
            "restart_ready_s_max": round(max(ready_s), 3)}


# ----------------------------------------------------------- declare latency


def declare_latencies(node: Node, count: int, timeout_s: float) -> list[float]:
    """`count` sequential declares of fresh durable queues on `node`; ms each."""
    def run() -> list[float]:
        names = [_queue_name(f"declare-{node.name}") for _ in range(count)]
        latencies: list[float] = []
        connection = _connect(node)
        try:
            channel = connection.channel()
            for name in names:
                started = time.perf_counter_ns()
                channel.queue_declare(name, durable=True, arguments=CLIENT_LOCAL)
                latencies.append((time.perf_counter_ns() - started) / 1e6)
            for name in names:  # untimed: leave the cluster as it was
                channel.queue_delete(name)
        finally:
            _close(connection)
        return latencies

    return _bounded(run, timeout_s, f"{count} declares on {node.name}")


def run_declares(cluster: Cluster, args: argparse.Namespace) -> Result:
    leader = cluster.node(cluster.wait_stable(args.stable_timeout_s))
    follower = next(node for node in cluster.nodes if node is not leader)
    result: Result = {"declares": args.declares, "declare_follower_node": follower.name,
                      "declare_leader_node": leader.name}
    for role, node in (("follower", follower), ("leader", leader)):
        say(f"{args.declares} declares on the {role} {node.name}")
        ms = declare_latencies(node, args.declares, args.timeout_s)
        result[f"declare_ms_p50_{role}"] = _percentile(ms, 0.50)
        result[f"declare_ms_p99_{role}"] = _percentile(ms, 0.99)
        result[f"declare_ms_max_{role}"] = round(max(ms), 3)
    return result


# ---------------------------------------------------------------- forwarding


def _declare_led_by(node: Node, timeout_s: float, prefix: str = "fwd",
                    arguments: Result | None = None) -> tuple[str, Result]:
    """A fresh durable queue led by `node` (declared there, client-local, with the extra
    `arguments`), checked; its name and its `GET /api/queues/%2F/{name}` view."""
    name = _queue_name(f"{prefix}-{node.name}")

    def run() -> None:
        connection = _connect(node)
        try:
            connection.channel().queue_declare(name, durable=True,
                                               arguments={**CLIENT_LOCAL, **(arguments or {})})
        finally:
            _close(connection)

    _bounded(run, timeout_s, f"declare {name} on {node.name}")
    view = get_json(node, f"/api/queues/%2F/{name}", 10.0)
    if view is None or view.get("leader") != node.name:
        raise BenchError(f"{name} declared client-local on {node.name} is led by "
                         f"{view and view.get('leader')!r}")
    return name, view


def _delete_queue(node: Node) -> Callable[[str], None]:
    def delete(name: str) -> None:
        with contextlib.suppress(httpx.HTTPError):
            httpx.delete(f"{node.http_url}/api/queues/%2F/{name}", auth=AUTH, timeout=10.0)
    return delete


def forwarding_trial(owner: Node, client: Node, args: argparse.Namespace) -> Result:
    name, _view = _declare_led_by(owner, args.timeout_s)
    try:
        published = publish_confirm(client.amqp_url, name, args)
        if published["messages"] != args.messages or published["nacked"]:
            raise BenchError(f"publish through {client.name}: {published}")
        consumed = consume(client.amqp_url, name, args.messages, args)
        if consumed["messages"] != args.messages:
            raise BenchError(f"consume through {client.name}: {consumed}")
    finally:
        _delete_queue(owner)(name)
    return {"publish_msg_s": published["msg_s"], "consume_msg_s": consumed["msg_s"],
            "publish_s": published["seconds"], "consume_s": consumed["seconds"]}


def run_forwarding(cluster: Cluster, args: argparse.Namespace) -> Result:
    leader = cluster.node(cluster.wait_stable(args.stable_timeout_s))
    owner, client = [node for node in cluster.nodes if node is not leader][:2]
    trials: dict[str, list[Result]] = {"direct": [], "forwarded": []}
    for trial in range(args.trials):
        for mode, via in (("direct", owner), ("forwarded", client)):
            say(f"trial {trial + 1}/{args.trials} {mode}: {args.messages} messages to a "
                 f"queue led by {owner.name}, client on {via.name}")
            trials[mode].append(forwarding_trial(owner, via, args))
            say(f"  {trials[mode][-1]}")
    best = {f"{mode}_{op}_msg_s": max(float(t[f"{op}_msg_s"]) for t in trials[mode])
            for mode in trials for op in ("publish", "consume")}

    def ratio(op: str) -> float:
        return round(best[f"forwarded_{op}_msg_s"] / max(best[f"direct_{op}_msg_s"], 1e-9), 3)

    return {**best, "forwarding_ratio_publish": ratio("publish"),
            "forwarding_ratio_consume": ratio("consume"), "queue_leader_node": owner.name,
            "forwarded_via_node": client.name, "trials": trials}


# ---------------------------------------------------------------------- main


@contextlib.contextmanager
def running_cluster(args: argparse.Namespace) -> Iterator[Cluster]:
    workdir = Path(tempfile.mkdtemp(prefix="cluster-bench-"))
    cluster = Cluster(workdir)
    failed = True
    try:
        for node in cluster.nodes:
            cluster.start(node)
        say(f"3 nodes in {workdir}: " + ", ".join(
            f"{n.name} pid {n.process.pid if n.process else '-'} amqp {n.amqp_port} "
            f"http {n.http_port}" for n in cluster.nodes))
        leader = cluster.wait_stable(args.start_timeout_s)
        say(f"cluster whole, Raft leader {leader}")
        yield cluster
        failed = False
    finally:
        cluster.stop_all()
        cluster.problems = cluster.log_problems()
        for name, lines in cluster.problems.items():
            say(f"{name}.log: {len(lines)} error/traceback lines, first: {lines[0][:300]}")
        if failed or args.keep_dir:
            say(f"kept {workdir} (node logs nI.log)")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    for flag, default, text in (
            ("rounds", 20, "election rounds (kill -9 of the Raft leader)"),
            ("declares", 200, "sequential declares timed on a follower and on the leader"),
            ("messages", 20_000, "messages per forwarding trial"),
            ("trials", 2, "direct / forwarded alternations (the best of each counts)"),
            ("body-bytes", 1024, "message size"),
            ("confirm-window", 500, "unconfirmed publishes at most"),
            ("prefetch", 100, "consumer prefetch"),
            ("ack-every", 1, "ack with multiple=True every N deliveries (1: each)")):
        add(f"--{flag}", type=int, default=default, help=f"{text} (default {default})")
    add("--election-timeout-s", type=float, default=30.0, help="bound on one failover")
    add("--stable-timeout-s", type=float, default=90.0,
        help="bound on waiting for a restarted node to rejoin")
    add("--start-timeout-s", type=float, default=120.0, help="bound on the cluster's start")
    add("--timeout-s", type=float, default=300.0, help="bound on each other workload")
    add("--keep-dir", action="store_true", help="keep the temp dir with the node logs")
    args = parser.parse_args(argv)
    if min(args.rounds, args.declares, args.messages, args.trials, args.confirm_window) < 1:
        parser.error("--rounds, --declares, --messages, --trials and --confirm-window "
                     "must be >= 1")
    if args.body_bytes < 8 or not 1 <= args.ack_every <= args.prefetch:
        parser.error("--body-bytes must be >= 8 and --ack-every between 1 and --prefetch")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    try:
        with running_cluster(args) as cluster:
            result: Result = {"bench": "cluster"}
            result.update(run_elections(cluster, args))
            result.update(run_declares(cluster, args))
            result.update(run_forwarding(cluster, args))
    except (BenchError, pika.exceptions.AMQPError, httpx.HTTPError, OSError,
            subprocess.SubprocessError) as error:
        say(f"failed: {error!r}")
        return 1
    result["node_log_error_lines"] = {
        name: len(lines) for name, lines in cluster.problems.items()}
    result["targets"] = {
        "election_p50_under_1s": result["election_ms_p50"] < 1000.0,
        "forwarding_ratio_at_least_0_7": min(result["forwarding_ratio_publish"],
                                             result["forwarding_ratio_consume"]) >= 0.7}
    result["params"] = {key: getattr(args, key) for key in (
        "rounds", "declares", "messages", "trials", "body_bytes", "confirm_window",
        "prefetch", "ack_every")} | {"nodes": NODE_COUNT,
                                     "seconds": round(time.monotonic() - started, 1)}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
