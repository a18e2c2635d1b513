"""Messages/s through a federated exchange link against the downstream's own publish rate.

Two `logbroker serve` nodes on 127.0.0.1 (temp data dirs, free ports). The downstream
federates exchange `fed-x` (topic) from the upstream with `ack-mode` `on-confirm` and
holds a durable queue bound to it with `#`.

- `local`: N persistent 1 KiB messages published to the downstream's `fed-x` with
  publisher confirms (pipelined, up to `--in-flight` unconfirmed), msgs/s.
- `link`: the same N published to the upstream's `fed-x`; msgs/s from the first
  publish to the moment the downstream queue holds all N (polled over HTTP).

- with `--queue-link`, also `queue_link`: N in the upstream's durable queue `work`,
  federated into the downstream's `work` (`ack-mode` `on-confirm`); msgs/s from the
  moment a consumer (prefetch 1000, acking each) starts on the downstream until it
  has all N: a federated queue moves messages only to where consumers wait.

Prints one JSON line: both rates and `link_ratio` = link / local (target >= 0.5).
Bounded: every wait has a deadline, both nodes are stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import aiormq
import httpx
from pamqp.commands import Basic

from bench.served_node import ServedNode, served_node

GUEST = ("guest", "guest")
START_TIMEOUT_S = 30.0


@dataclass
class Node:
    """A served node with the name it federates under."""

    name: str
    served: ServedNode

    @property
    def url(self) -> str:
        return self.served.http_url

    @property
    def amqp(self) -> str:
        return self.served.amqp_url


@contextmanager
def served(name: str) -> Iterator[Node]:
    with served_node(f"federation-bench-{name}", "--node-name", name,
                     start_timeout_s=START_TIMEOUT_S) as node:
        yield Node(name, node)


async def publish(url: str, count: int, in_flight: int, body: bytes,
                  queue: str | None = None) -> float:
    """Publish `count` persistent messages to fed-x (or straight to `queue`, declared
    durable) with confirms; seconds taken."""
    connection = await aiormq.connect(url)
    try:
        channel = await connection.channel(publisher_confirms=True)
        if queue is not None:
            await channel.queue_declare(queue, durable=True)
        window = asyncio.Semaphore(in_flight)
        properties = Basic.Properties(delivery_mode=2)

        async def one(index: int) -> None:
            async with window:
                confirmation = await channel.basic_publish(
                    body, exchange="" if queue else "fed-x",
                    routing_key=queue or f"k.{index % 16}", properties=properties)
                if not isinstance(confirmation, Basic.Ack):
                    raise RuntimeError("a publish was not confirmed")

        started = time.perf_counter()
        await asyncio.gather(*(one(index) for index in range(count)))
        return time.perf_counter() - started
    finally:
        await connection.close()


def queue_depth(node: Node, queue: str) -> int:
    reply = httpx.get(f"{node.url}/api/queues/%2F/{queue}", auth=GUEST, timeout=10)
    return int(reply.json().get("messages", 0)) if reply.status_code == 200 else 0


def wait_depth(node: Node, queue: str, count: int, timeout_s: float) -> float:
    deadline = time.monotonic() + timeout_s
    while queue_depth(node, queue) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{queue} did not reach {count} in {timeout_s} s")
        time.sleep(0.02)
    return time.perf_counter()


def setup(upstream: Node, downstream: Node) -> None:
    with httpx.Client(base_url=downstream.url, auth=GUEST, timeout=10) as http:
        http.put("/api/parameters/federation-upstream/%2F/up", json={"value": {
            "uri": upstream.amqp, "ack-mode": "on-confirm", "prefetch-count": 1000}})
        http.put("/api/exchanges/%2F/fed-x", json={"type": "topic", "durable": True})
        http.put("/api/queues/%2F/sink", json={"durable": True})
        http.post("/api/bindings/%2F/e/fed-x/q/sink", json={"routing_key": "#"})
        http.put("/api/policies/%2F/fed", json={
            "pattern": "^fed-x$", "apply-to": "exchanges",
            "definition": {"federation-upstream": "up"}})
        deadline = time.monotonic() + START_TIMEOUT_S
        while not any(link.get("status") == "running"
                      for link in http.get("/api/federation-links").json()):
            if time.monotonic() > deadline:
                raise RuntimeError("the link did not start")
            time.sleep(0.1)


async def consume_all(url: str, queue: str, count: int, timeout_s: float) -> float:
    """Consume `count` messages from `queue` (prefetch 1000, an ack each); seconds taken."""
    connection = await aiormq.connect(url)
    try:
        channel = await connection.channel()
        await channel.basic_qos(prefetch_count=1000)
        got = 0
        done = asyncio.Event()

        async def on_message(message: aiormq.abc.DeliveredMessage) -> None:
            nonlocal got
            await channel.basic_ack(message.delivery_tag or 0)
            got += 1
            if got >= count:
                done.set()

        started = time.perf_counter()
        await channel.basic_consume(queue, on_message)
        await asyncio.wait_for(done.wait(), timeout_s)
        return time.perf_counter() - started
    finally:
        await connection.close()


def queue_link_seconds(upstream: Node, downstream: Node, args: argparse.Namespace,
                       body: bytes) -> float:
    """N through the federated queue `work` (see the module doc)."""
    asyncio.run(publish(upstream.amqp, args.messages, args.in_flight, body, queue="work"))
    with httpx.Client(base_url=downstream.url, auth=GUEST, timeout=10) as http:
        http.put("/api/queues/%2F/work", json={"durable": True})
        http.put("/api/policies/%2F/fed-queue", json={
            "pattern": "^work$", "apply-to": "queues",
            "definition": {"federation-upstream": "up"}})
        deadline = time.monotonic() + START_TIMEOUT_S
        while not any(link.get("queue") == "work" and link.get("status") == "running"
                      for link in http.get("/api/federation-links").json()):
            if time.monotonic() > deadline:
                raise RuntimeError("the queue link did not start")
            time.sleep(0.1)
    return asyncio.run(consume_all(downstream.amqp, "work", args.messages, args.timeout_s))


def purge(node: Node, queue: str) -> None:
    httpx.delete(f"{node.url}/api/queues/%2F/{queue}/contents", auth=GUEST, timeout=30)


def run(args: argparse.Namespace) -> dict[str, object]:
    body = os.urandom(args.size)
    with served("fed-upstream") as upstream, served("fed-downstream") as downstream:
        setup(upstream, downstream)
        local_s = asyncio.run(publish(downstream.amqp, args.messages, args.in_flight, body))
        wait_depth(downstream, "sink", args.messages, args.timeout_s)
        purge(downstream, "sink")
        started = time.perf_counter()
        asyncio.run(publish(upstream.amqp, args.messages, args.in_flight, body))
        arrived = wait_depth(downstream, "sink", args.messages, args.timeout_s)
        queue_s = (queue_link_seconds(upstream, downstream, args, body) if args.queue_link
                   else None)
    local_rate = args.messages / local_s
    link_rate = args.messages / (arrived - started)
    result: dict[str, object] = {
        "bench": "federation", "messages": args.messages, "size": args.size,
        "ack_mode": "on-confirm", "local_msgs_s": round(local_rate),
        "link_msgs_s": round(link_rate), "link_ratio": round(link_rate / local_rate, 3)}
    if queue_s is not None:
        result["queue_link_msgs_s"] = round(args.messages / queue_s)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--in-flight", type=int, default=500)
    parser.add_argument("--timeout-s", type=float, default=120.0)
    parser.add_argument("--queue-link", action="store_true",
                        help="also time N messages through a federated queue link")
    print(json.dumps(run(parser.parse_args(argv))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
