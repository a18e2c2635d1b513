"""Failover rounds of `bench/replication_bench.py`: kill -9 of a replicated queue's leader.

Each round: a publisher thread connected to a node that does not lead the queue
publishes persistent messages with confirms, one at a time (pika
BlockingConnection, so every confirm is timed to one round trip); once it has
had confirms for `WARMUP_S`, the leader (`GET /api/queues/%2F/{q}` -> leader)
gets `kill -9`. The figure is the time from the kill to the confirm of the
first publish sent after the kill. The killed node is then restarted and the
next round waits until the cluster is whole and every member is in `in_sync`.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any

import pika  # type: ignore[import-untyped]

from bench.amqp_bench import BenchError
from bench.cluster_bench import _close, _connect, _percentile
from bench.cluster_processes import Cluster, Node, say
from bench.replicated_queue import (
    declare_replicated,
    delete_queue,
    leader_view,
    wait_all_in_sync,
)

Result = dict[str, Any]
WARMUP_S = 0.5
RETRY_PAUSE_S = 0.01


class ConfirmedPublisher(threading.Thread):
    """Publishes with confirms, one at a time, until `stop`; notes the first confirm of a
    publish sent after `mark()` (`recovered` is set then)."""

    def __init__(self, node: Node, queue: str, body_bytes: int) -> None:
        super().__init__(name=f"failover-publisher-{node.name}", daemon=True)
        self.node, self.queue = node, queue
        self.body = os.urandom(body_bytes)
        self.stop = threading.Event()
        self.recovered = threading.Event()
        self.warm = threading.Event()
        self.marked_at: float | None = None
        self.first_confirm_at: float | None = None
        self.confirmed = self.nacked = self.errors = 0
        self.error: BaseException | None = None

    def mark(self) -> None:
        self.marked_at = time.perf_counter()

    def run(self) -> None:
        started = time.perf_counter()
        connection = channel = None
        try:
            while not self.stop.is_set():
                try:
                    if channel is None or not channel.is_open:
                        _close(connection)
                        connection = _connect(self.node)
                        channel = connection.channel()
                        channel.confirm_delivery()
                    sent = time.perf_counter()
                    channel.basic_publish("", self.queue, self.body,
                                          pika.BasicProperties(delivery_mode=2))
                    self._confirmed(sent)
                    if time.perf_counter() - started >= WARMUP_S:
                        self.warm.set()
                except pika.exceptions.NackError:
                    self.nacked += 1
                    time.sleep(RETRY_PAUSE_S)
                except (pika.exceptions.AMQPError, OSError):
                    self.errors += 1
                    channel = None
                    time.sleep(RETRY_PAUSE_S)
        except BaseException as error:  # handed to the caller
            self.error = error
            self.recovered.set()
        finally:
            _close(connection)

    def _confirmed(self, sent: float) -> None:
        self.confirmed += 1
        marked = self.marked_at
        if marked is not None and sent >= marked and self.first_confirm_at is None:
            self.first_confirm_at = time.perf_counter()
            self.recovered.set()


def _controller(cluster: Cluster, skip: Node) -> str | None:
    for node in cluster.nodes:
        if node is not skip and node.running:
            status = cluster.status(node)
            if status is not None:
                leader = status.get("leader")
                return str(leader) if leader else None
    return None


def failover_round(cluster: Cluster, queue: str, client: Node, leader: Node,
                   args: argparse.Namespace) -> Result:
    """One kill -9 of `leader` while `client` publishes; returns the round's figures."""
    controller = _controller(cluster, leader)
    publisher = ConfirmedPublisher(client, queue, args.body_bytes)
    publisher.start()
    try:
        if not publisher.warm.wait(args.failover_timeout_s) or publisher.error:
            raise BenchError(f"publisher on {client.name} had no confirms before the kill "
                             f"({publisher.error!r})")
        before = (publisher.confirmed, publisher.nacked, publisher.errors)
        killed_at = time.perf_counter()
        cluster.kill9(leader)
        publisher.mark()  # publishes sent from now on cannot reach the old leader
        if not publisher.recovered.wait(args.failover_timeout_s) or publisher.error:
            raise BenchError(f"no confirmed publish {args.failover_timeout_s:g} s after "
                             f"killing {leader.name} ({publisher.error!r})")
        assert publisher.first_confirm_at is not None
        elapsed_ms = (publisher.first_confirm_at - killed_at) * 1000
    finally:
        publisher.stop.set()
        publisher.join(timeout=args.failover_timeout_s)
    new_view = leader_view(cluster, queue)
    return {"ms": round(elapsed_ms, 1), "killed": leader.name, "client": client.name,
            "killed_was_controller": controller == leader.name,
            "new_leader": new_view.get("leader") if new_view else None,
            "nacked": publisher.nacked - before[1], "errors": publisher.errors - before[2]}


def run_failover(cluster: Cluster, args: argparse.Namespace) -> Result:
    cluster.wait_stable(args.stable_timeout_s)
    queue = declare_replicated(cluster.nodes[0], "failover", args.timeout_s)
    rounds: list[Result] = []
    ready_s: list[float] = []
    try:
        for index in range(args.rounds):
            view = wait_all_in_sync(cluster, queue, args.stable_timeout_s)
            leader = cluster.node(view["leader"])
            others = [node for node in cluster.nodes if node is not leader]
            client = others[index % len(others)]
            rounds.append(failover_round(cluster, queue, client, leader, args))
            cluster.reap(leader)
            restarted = time.perf_counter()
            cluster.start(leader)
            cluster.wait_stable(args.stable_timeout_s)
            wait_all_in_sync(cluster, queue, args.stable_timeout_s)
            ready_s.append(time.perf_counter() - restarted)
            say(f"failover {index + 1}/{args.rounds}: {rounds[-1]}, restarted and in sync "
                f"again in {ready_s[-1]:.1f} s")
    finally:
        for node in cluster.nodes:
            if node.running:
                delete_queue(node, queue)
                break
    ms = [float(r["ms"]) for r in rounds]
    return {"failover_ms_p50": _percentile(ms, 0.50), "failover_ms_p99": _percentile(ms, 0.99),
            "failover_ms_max": round(max(ms), 1), "failover_rounds": len(ms),
            "failover_ms": ms, "failover_details": rounds,
            "failover_restart_in_sync_s_p50": _percentile(ready_s, 0.50),
            "failover_restart_in_sync_s_max": round(max(ready_s), 3)}
