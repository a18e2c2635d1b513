"""`logbroker perf`: a load test modelled on RabbitMQ's PerfTest, with its option names.

The flags and the usage text are `api.cli.perf_arguments`' (the parser imports
only those); this module runs the load test.
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
