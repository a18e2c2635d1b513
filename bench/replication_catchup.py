"""Catch-up phase of `bench/replication_bench.py`: a follower that missed a backlog.

On a fresh queue with 3 replicas led by node L, with every member in sync:
1. `kill -9` a follower F (not the Raft leader when there is a choice), and time
   the confirm of one message published right after (the stall until L stops
   waiting for F: `follower_kill_confirm_stall_s`);
2. publish `--catch-up-messages` persistent messages of `--body-bytes` to L with
   REST publish-batch (`--catch-up-batch` per request, `--catch-up-clients`
   requests in flight; the nacked messages of a batch are published again until
   every one is confirmed, and counted);
3. record L's RSS, then publish with confirms on L for `--compare-duration-s`
   (amqp_bench's publisher): the rate without a catch-up;
4. restart F; once L's `replica_lag` for F starts to fall, the same publisher
   runs again for the same time: the rate during the catch-up; meanwhile a
   thread polls L's view every `POLL_S` until F is in `in_sync` with lag 0;
5. catch-up rate = messages F had to copy (L's log end when F is in sync minus
   L's log end when F was killed) / seconds from F's first progress to in sync;
   L's RSS again, and its growth over the catch-up.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

import httpx

from bench.amqp_bench import BenchError
from bench.cluster_processes import AUTH, Cluster, Node, say
from bench.replicated_queue import (
    POLL_S,
    declare_replicated,
    delete_queue,
    node_rss,
    publish_for,
    queue_view,
    wait_all_in_sync,
)

Result = dict[str, Any]
HTTP_TIMEOUT_S = 120.0
RETRY_PAUSE_S = 0.05


def _batch_body(queue: str, count: int, body_bytes: int) -> bytes:
    payload = base64.b64encode(os.urandom(body_bytes)).decode()
    message = {"routing_key": queue, "payload": payload, "payload_encoding": "base64",
               "properties": {"delivery_mode": 2}}
    return json.dumps({"messages": [message] * count}).encode()


def bulk_publish(node: Node, queue: str, args: argparse.Namespace) -> Result:
    """`--catch-up-messages` through REST publish-batch, each one confirmed in the end:
    the messages of a batch that come back not confirmed (nacked: e.g. too few in-sync
    replicas) are published again after `RETRY_PAUSE_S`, and counted."""
    total, per = args.catch_up_messages, args.catch_up_batch
    sizes = [per] * (total // per) + ([total % per] if total % per else [])
    bodies: dict[int, bytes] = {}
    url = f"{node.http_url}/api/exchanges/%2F/amq.default/publish-batch"
    local = threading.local()
    deadline = time.monotonic() + args.catch_up_timeout_s

    def post(size: int) -> tuple[int, int, set[str]]:
        """Publish `size` messages until all are confirmed: (size, nacked, reasons)."""
        if not hasattr(local, "client"):
            local.client = httpx.Client(auth=AUTH, timeout=HTTP_TIMEOUT_S)
        left, nacked = size, 0
        reasons: set[str] = set()
        while left:
            if time.monotonic() > deadline:
                raise BenchError(f"bulk publish: {left} messages still nacked at the deadline")
            body = bodies.get(left) or bodies.setdefault(
                left, _batch_body(queue, left, args.body_bytes))
            response = local.client.post(url, content=body,
                                         headers={"content-type": "application/json"})
            response.raise_for_status()
            results = response.json()["results"]
            if len(results) != left or not all(r.get("routed") for r in results):
                raise BenchError(f"publish-batch: {len(results)} results for {left}, "
                                 f"e.g. {results[:1]}")
            bad = [r for r in results if not r.get("confirmed")]
            nacked, left = nacked + len(bad), len(bad)
            reasons.update(str(r.get("reason")) for r in bad)
            if bad:
                time.sleep(RETRY_PAUSE_S)
        return size, nacked, reasons

    started = time.perf_counter()
    say(f"catch-up: publishing {total} messages to {node.name} ({args.catch_up_clients} "
        f"x publish-batch of {per})")
    done = nacked = 0
    reasons: set[str] = set()
    executor = ThreadPoolExecutor(args.catch_up_clients, thread_name_prefix="bulk")
    try:
        futures = [executor.submit(post, size) for size in sizes]
        for future in as_completed(futures, timeout=args.catch_up_timeout_s):
            size, batch_nacked, batch_reasons = future.result()
            done, nacked = done + size, nacked + batch_nacked
            reasons |= batch_reasons
            if done % (100 * per) < per:
                say(f"  {done} of {total} published and confirmed ({nacked} nacks)")
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
    seconds = time.perf_counter() - started
    return {"catch_up_publish_msg_s": round(done / max(seconds, 1e-9), 1),
            "catch_up_publish_s": round(seconds, 3), "catch_up_publish_nacked": nacked,
            "catch_up_publish_nack_reasons": sorted(reasons)[:5]}


def probe_publish(node: Node, queue: str, args: argparse.Namespace) -> float:
    """Seconds until one message published with publish-batch is confirmed."""
    started = time.perf_counter()
    response = httpx.post(f"{node.http_url}/api/exchanges/%2F/amq.default/publish-batch",
                          content=_batch_body(queue, 1, args.body_bytes), auth=AUTH,
                          headers={"content-type": "application/json"},
                          timeout=HTTP_TIMEOUT_S)
    response.raise_for_status()
    if not response.json()["results"][0].get("confirmed"):
        raise BenchError(f"probe publish to {queue} not confirmed: {response.text[:300]}")
    return time.perf_counter() - started


class CatchUpWatch(threading.Thread):
    """Polls the leader's view of the queue until `follower` is in sync with lag 0."""

    def __init__(self, leader: Node, follower: str, queue: str, timeout_s: float) -> None:
        super().__init__(name="catch-up-watch", daemon=True)
        self.leader, self.follower, self.queue, self.timeout_s = leader, follower, queue, timeout_s
        self.started = time.perf_counter()
        self.initial_lag: int | None = None
        self.max_lag = 0
        self.progress_at: float | None = None  # first poll with a smaller lag
        self.synced_at: float | None = None
        self.end_offset = 0
        self.progressing = threading.Event()
        self.done = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        try:
            while time.monotonic() < deadline:
                self._poll()
                if self.synced_at is not None:
                    return
                time.sleep(POLL_S)
            self.error = f"{self.follower} not in sync after {self.timeout_s:g} s"
        finally:
            self.progressing.set()
            self.done.set()

    def _poll(self) -> None:
        view = queue_view(self.leader, self.queue)
        if view is None:
            return
        lag = (view.get("replica_lag") or {}).get(self.follower)
        if lag is None:
            return
        now = time.perf_counter()
        if self.initial_lag is None:
            self.initial_lag = lag
        self.max_lag = max(self.max_lag, lag)
        if self.progress_at is None and lag < self.initial_lag:
            self.progress_at = now
            self.progressing.set()
        if lag == 0 and self.follower in view.get("in_sync", []):
            self.synced_at, self.end_offset = now, int(view["next_offset"])
            self.progress_at = self.progress_at or now


def _follower_to_kill(cluster: Cluster, leader: Node, controller: str) -> Node:
    followers = [node for node in cluster.nodes if node is not leader]
    return next((node for node in followers if node.name != controller), followers[0])


def run_catch_up(cluster: Cluster, args: argparse.Namespace) -> Result:
    controller = cluster.wait_stable(args.stable_timeout_s)
    leader = cluster.nodes[0]
    queue = declare_replicated(leader, "catch-up", args.timeout_s)
    try:
        return _catch_up(cluster, leader, queue, controller, args)
    finally:
        delete_queue(leader, queue)


def _catch_up(cluster: Cluster, leader: Node, queue: str, controller: str,
              args: argparse.Namespace) -> Result:
    start_view = wait_all_in_sync(cluster, queue, args.stable_timeout_s)
    follower = _follower_to_kill(cluster, leader, controller)
    rss_start = node_rss(leader)
    say(f"catch-up: kill -9 {follower.name}, follower of {queue} (leader {leader.name})")
    killed_end = int(start_view["next_offset"])
    cluster.kill9(follower)
    cluster.reap(follower)
    stall_s = probe_publish(leader, queue, args)
    say(f"catch-up: first publish after the kill confirmed in {stall_s:.2f} s")
    result: Result = {"catch_up_leader": leader.name, "catch_up_follower": follower.name,
                      "follower_kill_confirm_stall_s": round(stall_s, 3),
                      **bulk_publish(leader, queue, args)}
    rss_before = node_rss(leader)
    say(f"catch-up: {args.compare_duration_s:g} s of publish+confirm without a catch-up")
    without = publish_for(leader.amqp_url, queue, args, args.compare_duration_s)
    restarted = time.perf_counter()
    cluster.start(follower)
    watch = CatchUpWatch(leader, follower.name, queue, args.catch_up_timeout_s)
    watch.start()
    if not watch.progressing.wait(args.stable_timeout_s):
        raise BenchError(f"{follower.name} restarted but copies nothing after "
                         f"{args.stable_timeout_s:g} s")
    say(f"catch-up: {follower.name} copying (lag {watch.initial_lag}); "
        f"{args.compare_duration_s:g} s of publish+confirm during the catch-up")
    during = publish_for(leader.amqp_url, queue, args, args.compare_duration_s)
    publish_ended = time.perf_counter()
    watch.join(args.catch_up_timeout_s)
    if watch.error or watch.synced_at is None:
        raise BenchError(f"catch-up: {watch.error or 'watch did not finish'}")
    rss_after = node_rss(leader)
    copied = watch.end_offset - killed_end
    copy_s = watch.synced_at - (watch.progress_at or watch.synced_at)
    say(f"catch-up: {follower.name} in sync after copying {copied} messages in "
        f"{copy_s:.1f} s ({watch.synced_at - restarted:.1f} s after its restart)")
    result.update({
        "catch_up_backlog": copied, "catch_up_max_lag": watch.max_lag,
        "catch_up_s": round(copy_s, 3),
        "catch_up_msg_s": round(copied / max(copy_s, 1e-9), 1),
        "catch_up_s_from_restart": round(watch.synced_at - restarted, 3),
        "catch_up_outlasted_publish": watch.synced_at > publish_ended,
        "publish_without_catch_up_msg_s": without["msg_s"],
        "publish_during_catch_up_msg_s": during["msg_s"],
        "publish_during_catch_up_ratio": round(during["msg_s"] / max(without["msg_s"], 1e-9),
                                               3),
        "publish_without_catch_up": without, "publish_during_catch_up": during,
        "leader_rss_mib_start": rss_start["rss_mib"],
        "leader_rss_mib_before_catch_up": rss_before["rss_mib"],
        "leader_rss_mib_after_catch_up": rss_after["rss_mib"],
        "leader_rss_growth_mib": round(rss_after["rss_mib"] - rss_before["rss_mib"], 1),
        "leader_rss_detail": {"start": rss_start, "before_catch_up": rss_before,
                              "after_catch_up": rss_after}})
    return result
