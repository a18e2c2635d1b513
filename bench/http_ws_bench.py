"""HTTP and WebSocket benchmark: logbroker's REST / WebSocket data plane against its AMQP.

`python bench/http_ws_bench.py` starts `logbroker serve` on free ports and prints one
JSON line per workload (progress on stderr), each on a fresh durable queue:
- amqp_publish_confirm: the reference, the AMQP benchmark's publish-with-confirms
  workload (pika, `--confirm-window` unconfirmed), in the same run on the same broker;
- ws_publish_confirm: `--messages` persistent messages of `--body-bytes` over one
  WebSocket, `--per-frame` messages per publish frame, at most `--frames-in-flight`
  frames unconfirmed;
- ws_consume_ack: those messages over a WebSocket subscription with `--prefetch`,
  acking with multiple=true every `--ack-every` deliveries;
- rest_batch_publish: the same count through `publish-batch`, `--per-frame` messages
  per request, `--frames-in-flight` requests at once;
- replay: the whole consumed (and acked) queue read back through the REST replay
  pages (`--page-bytes` per page) in the binary record-batch format, every batch's
  CRC checked and every record decoded by the client, payload MB/s;
then a `ratios` line: ws_publish_confirm / amqp_publish_confirm (target >= 3) and
replay MB/s (target >= 100). The two publish workloads alternate `--trials` times
(each trial a fresh queue) and each reports its median trial, with every trial's
msg/s in `trials_msg_s`: one 50,000-message trial lasts about a second, too short
to stand alone on a shared machine. Every workload starts after `os.sync()`: the
kernel writes the previous workloads' ~55 MB each back to disk on the same two
cores, and a trial that ran while it did was up to 40% slower (the broker's system
time tripled, mostly copying into page cache). Every workload stops by itself at
`--timeout-s`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from api.http.record_batches import records_in
from bench.amqp_bench import BenchError, publish_confirm
from bench.served_node import ServedNode, served_node

Result = dict[str, Any]
START_TIMEOUT_S = 60.0
AUTH = ("guest", "guest")
BASIC = "Basic " + base64.b64encode(b"guest:guest").decode()


def _say(message: str) -> None:
    print(f"[http-ws-bench] {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def logbroker_served() -> Iterator[ServedNode]:
    with served_node("http-ws-bench", start_timeout_s=START_TIMEOUT_S) as served:
        _say(f"logbroker: pid {served.pid}, AMQP {served.amqp_port}, HTTP {served.http_port}")
        yield served


def _queue(served: ServedNode, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    httpx.put(f"{served.http_url}/api/queues/%2F/{name}", auth=AUTH,
              json={"durable": True}).raise_for_status()
    return name


def _rate(count: int, seconds: float) -> float:
    return round(count / max(seconds, 1e-9), 1)


def _body(args: argparse.Namespace) -> str:
    return "x" * int(args.body_bytes)  # ASCII: travels as a JSON string, no base64


async def ws_publish_confirm(served: ServedNode, queue: str, args: argparse.Namespace) -> Result:
    body = _body(args)
    frames = -(-args.messages // args.per_frame)
    in_flight = asyncio.Semaphore(args.frames_in_flight)
    confirmed = nacked = 0
    async with connect(served.ws_url, additional_headers={"Authorization": BASIC},
                       max_size=None) as socket:

        async def receive() -> None:
            nonlocal confirmed, nacked
            for _ in range(frames):
                frame = json.loads(await socket.recv())
                if frame.get("op") != "confirm":
                    raise BenchError(f"unexpected frame {frame}")
                confirmed += len(frame["ids"])
                nacked += len(frame["nacks"])
                in_flight.release()

        started = time.perf_counter()
        receiver = asyncio.ensure_future(receive())
        sent = 0
        for _ in range(frames):
            count = min(args.per_frame, args.messages - sent)
            messages = [{"id": sent + i, "exchange": "", "routing_key": queue, "payload": body,
                         "properties": {"delivery_mode": 2}} for i in range(count)]
            sent += count
            await in_flight.acquire()
            await socket.send(json.dumps({"op": "publish", "messages": messages}))
        await asyncio.wait_for(receiver, args.timeout_s)
        seconds = time.perf_counter() - started
    return {"workload": "ws_publish_confirm", "messages": confirmed, "nacked": nacked,
            "msg_s": _rate(confirmed, seconds), "seconds": round(seconds, 3),
            "per_frame": args.per_frame, "frames_in_flight": args.frames_in_flight,
            "body_bytes": args.body_bytes, "persistent": True}


async def ws_consume_ack(served: ServedNode, queue: str, expected: int, args: argparse.Namespace
                         ) -> Result:
    async with connect(served.ws_url, additional_headers={"Authorization": BASIC},
                       max_size=None) as socket:
        await socket.send(json.dumps({"op": "subscribe", "queue": queue,
                                      "prefetch": args.prefetch}))
        started = time.perf_counter()
        received = await asyncio.wait_for(_drain(socket, expected, args), args.timeout_s)
        seconds = time.perf_counter() - started
    return {"workload": "ws_consume_ack", "messages": received, "msg_s": _rate(received, seconds),
            "seconds": round(seconds, 3), "prefetch": args.prefetch, "ack_every": args.ack_every}


async def _drain(socket: ClientConnection, expected: int, args: argparse.Namespace) -> int:
    received = 0
    while received < expected:
        frame = json.loads(await socket.recv())
        if frame.get("op") != "deliver":
            continue
        received += 1
        if received % args.ack_every == 0 or received == expected:
            await socket.send(json.dumps({"op": "ack", "delivery_tag": frame["delivery_tag"],
                                          "multiple": True}))
    return received


def rest_batch_publish(served: ServedNode, queue: str, args: argparse.Namespace) -> Result:
    """`--frames-in-flight` threads, each with its own keep-alive connection (httpx's
    sync client: its async one costs more client CPU than the broker spends)."""
    body = _body(args)
    requests = -(-args.messages // args.per_frame)
    counts = [min(args.per_frame, args.messages - i * args.per_frame) for i in range(requests)]
    local = threading.local()
    clients: list[httpx.Client] = []

    def one(count: int) -> int:
        if not hasattr(local, "client"):
            # Headers and body go out in two writes: without TCP_NODELAY the body
            # would wait for the broker's delayed ACK of the headers.
            transport = httpx.HTTPTransport(socket_options=[
                (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
            local.client = httpx.Client(base_url=served.http_url, auth=AUTH,
                                        timeout=args.timeout_s, transport=transport)
            clients.append(local.client)
        messages = [{"routing_key": queue, "payload": body,
                     "properties": {"delivery_mode": 2}}] * count
        answer = local.client.post("/api/exchanges/%2F/amq.default/publish-batch",
                                   json={"messages": messages})
        answer.raise_for_status()
        return sum(r["confirmed"] for r in answer.json()["results"])

    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(args.frames_in_flight) as pool:
            confirmed = sum(pool.map(one, counts, timeout=args.timeout_s))
    finally:
        for client in clients:
            client.close()
    seconds = time.perf_counter() - started
    return {"workload": "rest_batch_publish", "messages": confirmed,
            "msg_s": _rate(confirmed, seconds), "seconds": round(seconds, 3),
            "per_request": args.per_frame, "requests_in_flight": args.frames_in_flight}


def replay(served: ServedNode, queue: str, args: argparse.Namespace) -> Result:
    payload_bytes = records = 0
    offset = 0
    deadline = time.monotonic() + args.timeout_s
    with httpx.Client(base_url=served.http_url, auth=AUTH, timeout=args.timeout_s) as client:
        started = time.perf_counter()
        while time.monotonic() < deadline:
            page = client.get(f"/api/queues/%2F/{queue}/messages", params={
                "from_offset": offset, "max_bytes": args.page_bytes, "format": "batches"})
            page.raise_for_status()
            next_offset = int(page.headers["X-Next-Offset"])
            if next_offset <= offset:
                break
            for record in records_in(page.content, offset, next_offset):
                records += 1
                payload_bytes += len(record.value)
            offset = next_offset
        seconds = time.perf_counter() - started
    return {"workload": "replay", "messages": records, "msg_s": _rate(records, seconds),
            "mb_s": round(payload_bytes / 1e6 / max(seconds, 1e-9), 1),
            "seconds": round(seconds, 3), "page_bytes": args.page_bytes}


def _median_trial(trials: list[Result]) -> Result:
    """The trial with the median msg/s (the upper one of an even count), with every
    trial's figure alongside."""
    ranked = sorted(trials, key=lambda trial: float(trial["msg_s"]))
    return {**ranked[len(ranked) // 2], "trials_msg_s": [trial["msg_s"] for trial in trials]}


def run(args: argparse.Namespace) -> None:
    results: dict[str, Result] = {}

    def report(result: Result) -> None:
        results[result["workload"]] = result
        print(json.dumps({"bench": "http_ws", "target": "logbroker", **result}), flush=True)

    with logbroker_served() as served:
        # The two publish workloads alternate, each trial on a fresh queue; the median
        # of each counts, so one disturbed trial on a shared machine does not decide.
        amqp_trials: list[Result] = []
        ws_trials: list[Result] = []
        for trial in range(args.trials):
            _say(f"trial {trial + 1}/{args.trials}: AMQP publish with confirms (reference)")
            os.sync()
            amqp_trials.append({**publish_confirm(served.amqp_url, _queue(served, "amqp"), args),
                                "workload": "amqp_publish_confirm"})
            queue = _queue(served, "ws")
            _say(f"trial {trial + 1}/{args.trials}: WebSocket publish {args.messages} x "
                 f"{args.body_bytes} B")
            os.sync()
            ws_trials.append(asyncio.run(ws_publish_confirm(served, queue, args)))
        report(_median_trial(amqp_trials))
        report(_median_trial(ws_trials))
        _say("WebSocket consume with acks")
        os.sync()
        report(asyncio.run(ws_consume_ack(served, queue, results["ws_publish_confirm"]
                                          ["messages"], args)))
        _say("REST batch publish")
        os.sync()
        report(rest_batch_publish(served, _queue(served, "rest"), args))
        _say("replay of the consumed queue")
        os.sync()
        report(replay(served, queue, args))
    ratio = results["ws_publish_confirm"]["msg_s"] / max(
        results["amqp_publish_confirm"]["msg_s"], 1e-9)
    print(json.dumps({"bench": "http_ws", "workload": "ratios",
                      "ws_publish_vs_amqp_publish": round(ratio, 2), "ws_publish_target": 3.0,
                      "replay_mb_s": results["replay"]["mb_s"], "replay_target_mb_s": 100.0}),
          flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    for flag, default in (("messages", 50_000), ("trials", 3), ("body-bytes", 1024),
                          ("per-frame", 100),
                          ("frames-in-flight", 8), ("prefetch", 1000), ("ack-every", 100),
                          ("confirm-window", 500), ("page-bytes", 4 << 20)):
        add(f"--{flag}", type=int, default=default, help=f"default {default}")
    add("--timeout-s", type=float, default=300.0, help="bound on each workload")
    args = parser.parse_args(argv)
    if min(args.messages, args.trials, args.per_frame, args.frames_in_flight, args.prefetch,
           args.ack_every, args.confirm_window, args.page_bytes) < 1 or args.body_bytes < 8:
        parser.error("counts must be >= 1 and --body-bytes >= 8")
    if args.ack_every > args.prefetch:
        parser.error("--ack-every must be at most --prefetch")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        run(args)
    except (BenchError, httpx.HTTPError, OSError, TimeoutError) as error:
        _say(f"failed: {error!r}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
