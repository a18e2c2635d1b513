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

from api.perf.perf_settings import DEFAULT_TIME_S

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
