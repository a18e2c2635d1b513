"""Helpers of `bench/replication_bench.py`: a replicated queue on the bench cluster.

Declare a queue with `x-queue-replicas` led by a given node, read its
`GET /api/queues/%2F/{name}` view (leader, members, in_sync, replica_lag),
wait until every member is in sync, read a node's RSS, publish with confirms
for a fixed time (bench/amqp_bench.py's publisher), and measure the CPU other
processes used during the run.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import httpx

from bench.amqp_bench import BenchError, _Publisher, _rate, _Run
from bench.cluster_bench import _declare_led_by
from bench.cluster_processes import AUTH, Cluster, Node, get_json, say

Result = dict[str, Any]
REPLICAS = 3
POLL_S = 0.1


def declare_replicated(node: Node, prefix: str, timeout_s: float) -> str:
    """A fresh durable queue with REPLICAS replicas, led by `node` (checked)."""
    name, view = _declare_led_by(node, timeout_s, prefix, {"x-queue-replicas": REPLICAS})
    if len(view.get("members", [])) != REPLICAS:
        raise BenchError(f"{name} declared with {REPLICAS} replicas on {node.name}: {view}")
    return name


def delete_queue(node: Node, name: str) -> None:
    try:
        httpx.delete(f"{node.http_url}/api/queues/%2F/{name}", auth=AUTH, timeout=30.0)
    except httpx.HTTPError as error:
        say(f"could not delete {name}: {error!r}")


def queue_view(node: Node, name: str) -> Result | None:
    """The queue as `node` reports it; None if the node does not answer."""
    return get_json(node, f"/api/queues/%2F/{name}", 5.0)


def leader_view(cluster: Cluster, name: str) -> Result | None:
    """The view of the queue's leader node as that node reports it (with replica_lag)."""
    for node in cluster.nodes:
        if not node.running:
            continue
        view = queue_view(node, name)
        if view is None or not view.get("leader"):
            continue
        leader = cluster.node(view["leader"])
        if leader is node:
            return view
        if leader.running:
            return queue_view(leader, name)
    return None


def all_in_sync(view: Result | None) -> bool:
    if view is None or len(view.get("members", [])) != REPLICAS:
        return False
    lags = view.get("replica_lag") or {}
    return (set(view.get("in_sync", [])) == set(view["members"])
            and all(lags.get(member) == 0 for member in view["members"]
                    if member != view.get("leader")))


def wait_all_in_sync(cluster: Cluster, name: str, timeout_s: float) -> Result:
    """Wait until every member is in `in_sync` with no lag; return the leader's view."""
    deadline = time.monotonic() + timeout_s
    view = None
    while time.monotonic() < deadline:
        view = leader_view(cluster, name)
        if all_in_sync(view) and view is not None:
            return view
        time.sleep(POLL_S)
    raise BenchError(f"{name}: not every replica in sync after {timeout_s:g} s: {view}")


def rss_mib(pid: int) -> dict[str, float]:
    """VmRSS, RssAnon and RssFile of `pid` in MiB (/proc/PID/status)."""
    wanted = {"VmRSS": "rss_mib", "RssAnon": "rss_anon_mib", "RssFile": "rss_file_mib"}
    found: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in wanted:
            found[wanted[key]] = round(int(value.split()[0]) / 1024, 1)  # kB
    return found


def node_rss(node: Node) -> dict[str, float]:
    if node.process is None or not node.running:
        raise BenchError(f"{node.name} is not running")
    return rss_mib(node.process.pid)


def publish_for(url: str, queue: str, args: argparse.Namespace, seconds: float) -> Result:
    """amqp_bench's publish_confirm workload for `seconds` instead of a message count."""
    run = _Run(url, seconds + args.timeout_s)

    def on_event() -> None:
        if publisher.done():
            run.finish()

    def stop() -> None:
        publisher.stopped = True
        on_event()

    publisher = _Publisher(run, queue, args, None, 0.0, on_event)
    publisher.start()
    run.ioloop.call_later(seconds, stop)
    run.run()
    return {"messages": publisher.acked, "nacked": publisher.nacked,
            "msg_s": _rate(publisher.acked, publisher.started, publisher.finished),
            "seconds": round(publisher.finished - publisher.started, 3)}


class MachineLoad:
    """Load average, and the CPU time of other processes: all busy CPU minus ours."""

    def __init__(self) -> None:
        self.load_start = os.getloadavg()
        self.busy_start, self.own_start = self._busy_s(), self._own_s()

    @staticmethod
    def _busy_s() -> float:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        busy = sum(fields[:3]) + sum(fields[5:8])  # user nice system, irq softirq steal
        return busy / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _own_s() -> float:
        times = os.times()  # children: the nodes, once reaped
        return times.user + times.system + times.children_user + times.children_system

    def report(self) -> Result:
        busy, own = self._busy_s() - self.busy_start, self._own_s() - self.own_start
        return {"cores": os.cpu_count(), "load_avg_start": [round(v, 2) for v in
                                                            self.load_start],
                "load_avg_end": [round(v, 2) for v in os.getloadavg()],
                "cpu_busy_s": round(busy, 1), "cpu_own_s": round(own, 1),
                "cpu_other_s": round(max(0.0, busy - own), 1)}


def settle_machine(max_s: float = 30.0, busy_cores_max: float = 0.15,
                   window_s: float = 0.5) -> float:
    """Flush dirty pages (`sync`) and wait until the machine is quiet: less than
    `busy_cores_max` cores busy over `window_s`, for at most `max_s`; returns the wait.

    Trials of two brokers alternate on one machine; without this, one's background
    work after its trial (a quorum queue's WAL flush and compaction, kernel writeback
    of its files) runs during the other's trial and slows its fsyncs.
    """
    started = time.monotonic()
    os.sync()
    while time.monotonic() - started < max_s:
        before = MachineLoad._busy_s()
        time.sleep(window_s)
        if (MachineLoad._busy_s() - before) / window_s < busy_cores_max:
            break
    return round(time.monotonic() - started, 2)

