"""`logbroker perf`: a load test modelled on RabbitMQ's PerfTest, with its option names.

Producers publish stamped messages to an exchange, consumers consume from
one queue or a pattern of queues; every second a line gives the rates (sent,
confirmed, nacked, returned, received msg/s) and the latency from publish to
delivery (p50 / p95 / p99 / max ms), then a summary. Over AMQP 0-9-1 to any
broker (`--uri`, RabbitMQ too), or to this broker's WebSocket API (`--ws`).
The run always ends: at `--time` (60 s when no limit is given), at the
message limits, or at Ctrl-C (which still prints the summary; a second one
skips the draining).

examples:
  logbroker perf -x 1 -y 1 -c 100 -z 10
  logbroker perf -x 4 -y 4 -r 1000 -s 1024 -f persistent --queue-pattern 'perf-%d' \\
      --queue-pattern-from 1 --queue-pattern-to 4 -z 30 --output run.csv --plot run.html
  logbroker perf --ws http://guest:guest@127.0.0.1:15672 -c 500 -z 10 --plot run.png
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import secrets
import signal
import sys
from urllib.parse import urlsplit, urlunsplit

import aiormq

from api.cli.options import UsageError
from api.cli.run import FAILED, OK, fail, tls_context
from api.client import Client
from api.perf import plot_writer, sample_files
from api.perf.amqp_transport import AmqpTransport
from api.perf.perf_run import PerfRun
from api.perf.perf_settings import DEFAULT_TIME_S, PerfSettings
from api.perf.ports import Transport
from api.perf.run_summary import Summary
from api.perf.sampler import Sample
from api.perf.topology_plan import plan_topology, queue_names
from api.perf.ws_transport import WsTransport

DEFAULT_URI = "amqp://guest:guest@127.0.0.1:5672/"
FLAGS = ("persistent", "mandatory")


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _rate(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError("must be above 0 (leave it out for no limit)")
    return value


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"true or false, not {text!r}")
    return text.lower() == "true"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--help", "-?", action="help", help="show this help and exit")
    add("--uri", "-h", default=DEFAULT_URI, help=f"AMQP URI (default: {DEFAULT_URI})")
    add("--ws", metavar="URL", help="use this broker's WebSocket API at URL "
        "(http://USER:PASS@HOST:PORT) instead of AMQP")
    add("--producers", "-x", type=_count, default=1, help="producer count (default: 1)")
    add("--consumers", "-y", type=_count, default=1, help="consumer count (default: 1)")
    add("--rate", "-r", type=_rate, help="producer rate limit, msg/s per producer")
    add("--consumer-rate", "-R", type=_rate, help="consumer rate limit, msg/s per consumer")
    add("--size", "-s", type=int, default=12, help="message size in bytes (default: 12)")
    add("--flag", "-f", action="append", choices=FLAGS, default=[],
        help="message flag: persistent (and durable queues), mandatory (repeatable)")
    add("--confirm", "-c", type=_positive, metavar="N",
        help="publisher confirms, at most N unconfirmed per producer")
    add("--qos", "-q", type=_count, default=500,
        help="consumer prefetch count (default: 500)")
    add("--multi-ack-every", "-A", type=_count, default=0, metavar="N",
        help="ack every N messages with multiple (default: each one)")
    add("--autoack", "-a", action="store_true", help="consume with no acks")
    add("--queue", "-u", help="queue name (default: a generated perf-test-... name)")
    add("--queue-pattern", metavar="PATTERN", help="queue names with %%d, e.g. 'perf-%%d'")
    add("--queue-pattern-from", type=int, default=1, metavar="N", help="(default: 1)")
    add("--queue-pattern-to", type=int, metavar="M")
    add("--auto-delete", "-ad", type=_boolean, default=True, metavar="true|false",
        help="queues deleted after their last consumer (default: true)")
    add("--predeclared", "-p", action="store_true",
        help="use the exchange and queues that exist (passive declares)")
    add("--exchange", "-e", default="direct", help="exchange name (default: direct)")
    add("--type", "-t", default="direct", help="exchange type (default: direct)")
    add("--routing-key", "-k", help="routing key (default: the queue's name)")
    add("--time", "-z", type=float, metavar="SECONDS",
        help=f"run time (default: {DEFAULT_TIME_S:g} s when no message limit is given)")
    add("--pmessages", "-C", type=_positive, metavar="N", help="messages per producer")
    add("--cmessages", "-D", type=_positive, metavar="N", help="messages per consumer")
    add("--output", "-o", metavar="FILE", action="append", default=[],
        help="write the per-second samples: .json or .csv (repeatable)")
    add("--plot", metavar="FILE", action="append", default=[],
        help="draw rate and latency over time: .html (plotly) or .png (matplotlib), from "
             "the optional extra 'perf' (repeatable)")


def settings_from(args: argparse.Namespace) -> PerfSettings:
    """The run's settings; UsageError naming the flag of a bad one."""
    try:
        pattern = args.queue_pattern
        queues = queue_names(args.queue, pattern, args.queue_pattern_from,
                             args.queue_pattern_to, f"perf-test-{secrets.token_hex(4)}")
        limited = args.pmessages is not None or args.cmessages is not None
        settings = PerfSettings(
            topology=plan_topology(args.exchange, args.type, queues, args.routing_key,
                                   pattern is not None),
            producers=args.producers, consumers=args.consumers, rate=args.rate,
            consumer_rate=args.consumer_rate, size=args.size,
            persistent="persistent" in args.flag, mandatory="mandatory" in args.flag,
            confirm=args.confirm, qos=args.qos, multi_ack_every=args.multi_ack_every,
            autoack=args.autoack,
            time_s=args.time if args.time is not None else (
                PerfSettings.time_s if not limited else 86_400.0),
            pmessages=args.pmessages, cmessages=args.cmessages, auto_delete=args.auto_delete,
            predeclared=args.predeclared)
        settings.check()
        for path in args.output:
            sample_files.check_output_path(path)
        for path in args.plot:
            plot_writer.check_plot_path(path)
    except ValueError as error:
        raise UsageError(str(error)) from None
    return settings


def _rate_text(value: float) -> str:
    return f"{value:.0f}"


def _latency_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def sample_line(sample: Sample) -> str:
    latencies = "/".join(_latency_text(v) for v in (
        sample.latency_p50_ms, sample.latency_p95_ms, sample.latency_p99_ms,
        sample.latency_max_ms))
    return (f"time {sample.elapsed_s:7.3f} s, sent {_rate_text(sample.sent)} msg/s, "
            f"confirmed {_rate_text(sample.confirmed)} msg/s, "
            f"nacked {_rate_text(sample.nacked)} msg/s, "
            f"returned {_rate_text(sample.returned)} msg/s, "
            f"received {_rate_text(sample.received)} msg/s, "
            f"latency p50/p95/p99/max {latencies} ms")


def summary_lines(summary: Summary) -> list[str]:
    latencies = ", ".join(f"{name} {_latency_text(value)}" for name, value in (
        ("p50", summary.latency_p50_ms), ("p95", summary.latency_p95_ms),
        ("p99", summary.latency_p99_ms), ("max", summary.latency_max_ms),
        ("mean", summary.latency_mean_ms)))
    return [
        f"summary: {summary.duration_s:.3f} s (producing {summary.producing_s:.3f} s), "
        f"stopped by {summary.stopped_by}",
        f"totals: sent {summary.sent}, confirmed {summary.confirmed}, "
        f"nacked {summary.nacked}, returned {summary.returned}, received {summary.received}",
        f"averages: sending {summary.sent_rate:.0f} msg/s, "
        f"receiving {summary.received_rate:.0f} msg/s",
        f"latency ms: {latencies}",
    ]


def ws_base_url(url: str) -> str:
    """http(s)://USER:PASS@HOST:PORT from what a user may give: ws(s)://.../ws too."""
    parts = urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    if scheme not in ("http", "https"):
        raise UsageError(f"--ws: {url!r} is not an http://, https://, ws:// or wss:// URL")
    path = parts.path.rstrip("/").removesuffix("/ws")
    return urlunsplit((scheme, parts.netloc, path, "", ""))


def _transport(args: argparse.Namespace) -> Transport:
    if args.ws:
        return WsTransport(ws_base_url(args.ws), args.vhost, args.timeout, tls_context(args))
    return AmqpTransport(args.uri)


async def _run(run: PerfRun) -> None:
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, run.interrupt)
    try:
        await run.run()
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def perf(_client: Client, args: argparse.Namespace) -> int:
    """The `perf` handler (the HTTP client the CLI builds is not used)."""
    settings = settings_from(args)
    if args.time is None and args.pmessages is None and args.cmessages is None:
        print(f"no --time, --pmessages or --cmessages: running {DEFAULT_TIME_S:g} s",
              file=sys.stderr)

    def show(sample: Sample) -> None:
        print(sample_line(sample), flush=True)

    # aiormq logs each lost connection with a traceback; the run reports its failure once.
    logging.getLogger("aiormq").setLevel(logging.CRITICAL)
    run = PerfRun(settings, _transport(args), show)
    try:
        asyncio.run(_run(run))
    except aiormq.AMQPError as error:
        return fail(f"the broker refused: {error!r}", FAILED)
    summary = run.summary
    assert summary is not None
    for line in summary_lines(summary):
        print(line, flush=True)
    samples = list(run.sampler.samples) if run.sampler is not None else []
    for path in args.output:
        sample_files.write_samples(path, samples, summary)
    for path in args.plot:
        plot_writer.write_plot(path, samples)
    if run.failure is not None:
        return fail(f"the run failed: {run.failure!r}", FAILED)
    return OK
