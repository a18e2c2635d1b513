"""AMQP 0-9-1 benchmark with pika: logbroker, optionally side by side with RabbitMQ.

`python bench/amqp_bench.py --url amqp://guest:guest@127.0.0.1:5672/` prints one JSON
line per workload (progress on stderr), all on a fresh durable queue:
- publish_confirm: `--messages` persistent messages of `--body-bytes`, publisher
  confirms with at most `--confirm-window` unconfirmed (pika SelectConnection);
- consume: those messages, prefetch `--prefetch`, manual acks (`--ack-every 1`: each
  message; N: multiple=True every N);
- pubsub_latency: one producer and one consumer connection for `--duration-s`, the
  producer paced at 2,000 msg/s, then again publishing as fast as the same confirm
  window allows (`--rates`, or one `--rate`; 0 is unpaced); p50/p99 latency from the
  publish call to the consumer's callback (both on one IOLoop, one process).
`--logbroker-serve` starts `python -m logbroker serve` on a free port instead of
using `--url`; `--compare-rabbitmq` installs Debian's rabbitmq-server if missing, runs
a private node on free ports with the identical workloads, and prints the ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pika  # type: ignore[import-untyped]
from pika.adapters.select_connection import IOLoop  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script
from bench.free_ports import free_port

STAMP = struct.Struct(">Q")  # perf_counter_ns() at publish, first 8 bytes of every body
START_TIMEOUT_S, STOP_TIMEOUT_S, RATE_TICK_S = 120.0, 60.0, 0.002
RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
RABBITMQCTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"
Result = dict[str, Any]


class BenchError(RuntimeError):
    pass


def _say(message: str) -> None:
    print(f"[amqp-bench] {message}", file=sys.stderr, flush=True)


class _Run:
    """SelectConnections sharing one IOLoop; stops on `finish()`, an error or a deadline."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url, self.timeout_s, self.ioloop = url, timeout_s, IOLoop()
        self.connections: list[Any] = []
        self.error: str | None = None
        self.closing = False

    def open_channel(self, on_channel: Callable[[Any], None]) -> None:
        def on_channel_open(channel: Any) -> None:
            channel.add_on_close_callback(lambda _ch, why: self._closed(f"channel: {why!r}"))
            on_channel(channel)

        self.connections.append(pika.SelectConnection(
            pika.URLParameters(self.url), custom_ioloop=self.ioloop,
            on_open_callback=lambda conn: conn.channel(on_open_callback=on_channel_open),
            on_open_error_callback=lambda _conn, error: self.fail(f"cannot connect: {error!r}"),
            on_close_callback=lambda _conn, why: self._closed(f"connection: {why!r}")))

    def _closed(self, what: str) -> None:
        if not self.closing:
            self.fail(f"closed by the broker: {what}")
        elif all(connection.is_closed for connection in self.connections):
            self.ioloop.stop()

    def fail(self, message: str) -> None:
        self.error = self.error or message
        self.closing = True
        self.ioloop.stop()

    def finish(self) -> None:
        """Close every connection; the loop stops when the last one is closed."""
        self.closing = True
        for connection in self.connections:
            if not (connection.is_closed or connection.is_closing):
                connection.close()

    def run(self) -> None:
        self.ioloop.call_later(self.timeout_s, lambda: self.fail(f"timeout {self.timeout_s} s"))
        self.ioloop.start()
        if self.error is not None:
            raise BenchError(self.error)


class _Publisher:
    """Persistent publishes with confirms: at most `window` unconfirmed, optionally paced."""

    def __init__(self, run: _Run, queue: str, args: argparse.Namespace,
                 total: int | None, rate: float, on_event: Callable[[], None]) -> None:
        self.run, self.queue, self.total, self.rate = run, queue, total, rate
        self.window, self.on_event = args.confirm_window, on_event
        self.padding = os.urandom(args.body_bytes - STAMP.size)
        self.properties = pika.BasicProperties(delivery_mode=2)
        self.channel: Any = None
        self.outstanding: set[int] = set()
        self.low = 1  # every delivery tag below this one is confirmed
        self.sent = self.acked = self.nacked = 0
        self.stopped, self.started, self.finished = False, 0.0, 0.0

    def start(self) -> None:
        self.run.open_channel(self._on_channel)

    def _on_channel(self, channel: Any) -> None:
        self.channel = channel
        channel.confirm_delivery(ack_nack_callback=self._on_confirm, callback=self._on_select)

    def _on_select(self, _frame: Any) -> None:
        self.started = time.perf_counter()
        self._pump()
        if self.rate > 0:
            self._tick()

    def _tick(self) -> None:
        if not self.stopped:
            self._pump()
            self.run.ioloop.call_later(RATE_TICK_S, self._tick)

    def _pump(self) -> None:
        room = self.window - len(self.outstanding)
        if self.total is not None:
            room = min(room, self.total - self.sent)
        if self.rate > 0:
            room = min(room, int(self.rate * (time.perf_counter() - self.started)) - self.sent)
        for _ in range(0 if self.stopped else room):
            body = STAMP.pack(time.perf_counter_ns()) + self.padding
            self.channel.basic_publish("", self.queue, body, self.properties)
            self.sent += 1
            self.outstanding.add(self.sent)

    def _on_confirm(self, frame: Any) -> None:
        method, tag = frame.method, frame.method.delivery_tag
        count = 0
        for confirmed in range(self.low, tag + 1) if method.multiple else (tag,):
            if confirmed in self.outstanding:
                self.outstanding.discard(confirmed)
                count += 1
        while self.low <= self.sent and self.low not in self.outstanding:
            self.low += 1
        if isinstance(method, pika.spec.Basic.Nack):
            self.nacked += count
        else:
            self.acked += count
        self.finished = time.perf_counter()
        self._pump()
        self.on_event()

    def done(self) -> bool:
        return (self.stopped or self.sent == self.total) and not self.outstanding


class _Consumer:
    """Manual-ack consumer with a prefetch limit; records latencies from the body stamp."""

    def __init__(self, run: _Run, queue: str, args: argparse.Namespace,
                 on_event: Callable[[], None]) -> None:
        self.run, self.queue, self.on_event = run, queue, on_event
        self.prefetch, self.ack_every = args.prefetch, args.ack_every
        self.channel: Any = None
        self.on_ready: Callable[[], None] = lambda: None
        self.received = self.unacked = self.last_tag = 0
        self.latencies_ns: list[int] = []
        self.started = self.finished = 0.0

    def start(self, on_ready: Callable[[], None]) -> None:
        self.on_ready = on_ready
        self.run.open_channel(self._on_channel)

    def _on_channel(self, channel: Any) -> None:
        self.channel = channel
        channel.basic_qos(prefetch_count=self.prefetch, callback=self._on_qos)

    def _on_qos(self, _frame: Any) -> None:
        self.started = time.perf_counter()
        self.channel.basic_consume(self.queue, self._on_message, auto_ack=False,
                                   callback=lambda _frame: self.on_ready())

    def _on_message(self, _channel: Any, method: Any, _properties: Any, body: bytes) -> None:
        self.latencies_ns.append(time.perf_counter_ns() - STAMP.unpack_from(body)[0])
        self.received, self.unacked = self.received + 1, self.unacked + 1
        self.last_tag = method.delivery_tag
        if self.unacked >= self.ack_every:
            self.ack_pending()
        self.finished = time.perf_counter()
        self.on_event()

    def ack_pending(self) -> None:
        if self.unacked:
            self.channel.basic_ack(self.last_tag, multiple=self.ack_every > 1)
            self.unacked = 0


def _rate(count: int, started: float, finished: float) -> float:
    return round(count / max(finished - started, 1e-9), 1)


def publish_confirm(url: str, queue: str, args: argparse.Namespace) -> Result:
    run = _Run(url, args.timeout_s)
    publisher = _Publisher(run, queue, args, args.messages, 0.0,
                           lambda: run.finish() if publisher.done() else None)
    publisher.start()
    run.run()
    return {"workload": "publish_confirm", "messages": publisher.acked,
            "msg_s": _rate(publisher.acked, publisher.started, publisher.finished),
            "seconds": round(publisher.finished - publisher.started, 3),
            "nacked": publisher.nacked, "confirm_window": args.confirm_window,
            "body_bytes": args.body_bytes, "persistent": True}


def consume(url: str, queue: str, expected: int, args: argparse.Namespace) -> Result:
    run = _Run(url, args.timeout_s)

    def on_message() -> None:
        if consumer.received >= expected:
            consumer.ack_pending()
            run.finish()

    consumer = _Consumer(run, queue, args, on_message)
    consumer.start(lambda: None)
    run.run()
    return {"workload": "consume", "messages": consumer.received,
            "msg_s": _rate(consumer.received, consumer.started, consumer.finished),
            "seconds": round(consumer.finished - consumer.started, 3),
            "prefetch": args.prefetch, "ack_every": args.ack_every}


def _percentile_ms(sorted_ns: list[int], fraction: float) -> float:
    """Nearest-rank percentile, in milliseconds."""
    if not sorted_ns:
        return 0.0
    index = min(len(sorted_ns) - 1, max(0, round(fraction * len(sorted_ns)) - 1))
    return round(sorted_ns[index] / 1e6, 3)


def pubsub_latency(url: str, queue: str, args: argparse.Namespace,
                   rate: float | None = None) -> Result:
    rate = args.rate if rate is None else rate
    run = _Run(url, args.duration_s + args.timeout_s)

    def on_event() -> None:  # done once publishing stopped and every ack'd message arrived
        if publisher.done() and consumer.received >= publisher.acked:
            consumer.ack_pending()
            run.finish()

    def stop_publishing() -> None:
        publisher.stopped = True
        on_event()

    def consumer_ready() -> None:
        publisher.start()
        run.ioloop.call_later(args.duration_s, stop_publishing)

    publisher = _Publisher(run, queue, args, None, rate, on_event)
    consumer = _Consumer(run, queue, args, on_event)
    consumer.start(consumer_ready)
    run.run()
    latencies = sorted(consumer.latencies_ns)
    return {"workload": "pubsub_latency", "messages": consumer.received,
            "msg_s": _rate(consumer.received, publisher.started, consumer.finished),
            "p50_ms": _percentile_ms(latencies, 0.50), "p99_ms": _percentile_ms(latencies, 0.99),
            "max_ms": _percentile_ms(latencies, 1.0), "sent": publisher.sent,
            "nacked": publisher.nacked, "rate_limit": rate, "duration_s": args.duration_s}


def _queue_op(url: str, queue: str, delete: bool) -> None:
    with contextlib.closing(pika.BlockingConnection(pika.URLParameters(url))) as connection:
        channel = connection.channel()
        if delete:
            channel.queue_delete(queue)
        else:
            channel.queue_declare(queue, durable=True)


def run_workloads(url: str, target: str, args: argparse.Namespace) -> dict[str, Result]:
    queue = f"amqp-bench-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    _queue_op(url, queue, delete=False)
    results: dict[str, Result] = {}

    def report(result: Result, key: str | None = None) -> None:
        results[key or result["workload"]] = result
        print(json.dumps({"bench": "amqp", "target": target, **result}), flush=True)

    try:
        _say(f"{target}: publish {args.messages} x {args.body_bytes} B to {queue}")
        report(publish_confirm(url, queue, args))
        _say(f"{target}: consume")
        report(consume(url, queue, results["publish_confirm"]["messages"], args))
        for rate in args.rates:
            _say(f"{target}: 1 producer + 1 consumer for {args.duration_s} s, "
                 f"{_pace(rate).replace('_', ' ')}")
            report(pubsub_latency(url, queue, args, rate), f"pubsub_latency {_pace(rate)}")
    finally:
        with contextlib.suppress(Exception):
            _queue_op(url, queue, delete=True)
    return results



def _wait_for_amqp(url: str, process: subprocess.Popen[bytes], log_path: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            pika.BlockingConnection(pika.URLParameters(url)).close()
            return
        except pika.exceptions.AMQPError:
            time.sleep(0.5)
    with open(log_path, errors="replace") as log:
        tail = log.read()[-3000:]
    raise BenchError(f"no AMQP at {url} (exit code {process.poll()}); log tail:\n{tail}")


def _stop(process: subprocess.Popen[bytes], stop_command: list[str] | None,
          env: dict[str, str]) -> None:
    if process.poll() is None and stop_command is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run(stop_command, env=env, capture_output=True,
                           timeout=STOP_TIMEOUT_S, check=False)
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _say(f"pid {process.pid} did not stop; killing its process group")
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_TIMEOUT_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # leftovers of its session (erl_child_setup)


@contextlib.contextmanager
def _served(name: str, port: int, command: Callable[[str], tuple[list[str], dict[str, str]]],
            stop_command: list[str] | None = None) -> Iterator[str]:
    """Run `command(workdir)` in its own session for the block; yield its AMQP URL."""
    workdir = tempfile.mkdtemp(prefix=f"amqp-bench-{name}-")
    url, log_path = f"amqp://guest:guest@127.0.0.1:{port}/", os.path.join(workdir, "console.log")
    argv, env = command(workdir)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        _say(f"{name}: pid {process.pid}, AMQP port {port}")
        _wait_for_amqp(url, process, log_path)
        yield url
    finally:
        _stop(process, stop_command, env)
        shutil.rmtree(workdir, ignore_errors=True)


def logbroker_served() -> contextlib.AbstractContextManager[str]:
    port = free_port()
    return _served("logbroker", port, lambda workdir: (
        [sys.executable, "-m", "logbroker", "serve", "--workers", "1", "--data-dir",
         os.path.join(workdir, "data"), "--amqp-port", str(port),
         "--http-port", str(free_port()), "--host", "127.0.0.1"],
        dict(os.environ)))


def ensure_rabbitmq() -> None:
    if os.path.exists(RABBITMQ_SERVER):
        return
    _say("installing rabbitmq-server from Debian's packages")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "install", "-y", "-q", "rabbitmq-server"], env=env,
                   check=True, timeout=900, stdout=sys.stderr)
    # The package may start the distribution's service on 5672: it must not stay up.
    subprocess.run(["service", "rabbitmq-server", "stop"], env=env, capture_output=True,
                   timeout=STOP_TIMEOUT_S, check=False)


def _rabbitmq_env(workdir: str, port: int, node: str) -> dict[str, str]:
    """A private node: its own HOME (Erlang cookie), ports, data, logs; no plugins."""
    config, plugins = Path(workdir, "rabbitmq.conf"), Path(workdir, "enabled_plugins")
    config.write_text("loopback_users.guest = true\n")
    plugins.write_text("[].\n")  # no management plugin, no plugin at all
    return dict(
        os.environ, HOME=workdir, RABBITMQ_NODENAME=node, RABBITMQ_NODE_PORT=str(port),
        RABBITMQ_NODE_IP_ADDRESS="127.0.0.1", RABBITMQ_DIST_PORT=str(free_port()),
        RABBITMQ_CONFIG_FILE=str(config), RABBITMQ_ENABLED_PLUGINS_FILE=str(plugins),
        RABBITMQ_MNESIA_BASE=os.path.join(workdir, "mnesia"),
        RABBITMQ_LOG_BASE=os.path.join(workdir, "log"),
        RABBITMQ_PID_FILE=os.path.join(workdir, "rabbitmq.pid"))


def rabbitmq_served() -> contextlib.AbstractContextManager[str]:
    port, node = free_port(), f"bench-{os.getpid()}@localhost"
    return _served("rabbitmq", port, lambda workdir: (
        [RABBITMQ_SERVER], _rabbitmq_env(workdir, port, node)),
        [RABBITMQCTL, "-n", node, "stop"])


def _pace(rate: float) -> str:
    return "unpaced" if rate <= 0 else f"{rate:g}_msg_s"


def _ratios(ours: dict[str, Result], theirs: dict[str, Result], rates: list[float]) -> Result:
    def ratio(workload: str, key: str) -> float:
        return round(float(ours[workload][key]) / max(float(theirs[workload][key]), 1e-9), 3)

    ratios = {"publish_confirm": ratio("publish_confirm", "msg_s"),
              "consume": ratio("consume", "msg_s")}
    met = {"publish_confirm_ge_1": ratios["publish_confirm"] >= 1.0,
           "consume_ge_1": ratios["consume"] >= 1.0}
    for rate in rates:
        name = f"p99_latency_{_pace(rate)}"
        ratios[name] = ratio(f"pubsub_latency {_pace(rate)}", "p99_ms")
        met[f"{name}_le_rabbitmq"] = ratios[name] <= 1.0
    return {"bench": "amqp", "ratios": ratios, "targets_met": met}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--url", default="amqp://guest:guest@127.0.0.1:5672/", help="a running logbroker")
    add("--logbroker-serve", action="store_true", help="start logbroker as a child")
    add("--compare-rabbitmq", action="store_true", help="also run against RabbitMQ")
    for flag, default in (("messages", 50_000), ("body-bytes", 1024), ("confirm-window", 500),
                          ("prefetch", 100), ("ack-every", 1)):
        add(f"--{flag}", type=int, default=default, help=f"default {default}")
    add("--duration-s", type=float, default=10.0, help="pubsub_latency length")
    add("--rates", default="2000,0",
        help="pubsub_latency producer paces, msg/s, comma-separated (0: unpaced)")
    add("--rate", type=float, help="one pubsub_latency pace instead of --rates")
    add("--timeout-s", type=float, default=600.0, help="bound on each workload")
    args = parser.parse_args(argv)
    try:
        args.rates = ([args.rate] if args.rate is not None
                      else [float(rate) for rate in args.rates.split(",") if rate.strip()])
    except ValueError:
        parser.error("--rates must be numbers separated by commas")
    if not args.rates or min(args.rates) < 0:
        parser.error("--rates needs at least one pace >= 0")
    args.rate = args.rates[0]
    if not 1 <= args.ack_every <= args.prefetch:
        parser.error("--ack-every must be between 1 and --prefetch")
    if min(args.messages, args.confirm_window, args.body_bytes - STAMP.size + 1) < 1:
        parser.error("--messages and --confirm-window must be >= 1, --body-bytes >= 8")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.compare_rabbitmq:
        ensure_rabbitmq()
    try:
        served = logbroker_served() if args.logbroker_serve else contextlib.nullcontext(args.url)
        with served as url:
            ours = run_workloads(url, "logbroker", args)
        if args.compare_rabbitmq:
            with rabbitmq_served() as url:
                theirs = run_workloads(url, "rabbitmq", args)
            print(json.dumps(_ratios(ours, theirs, args.rates)), flush=True)
    except (BenchError, pika.exceptions.AMQPError, OSError) as error:
        _say(f"failed: {error!r}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
