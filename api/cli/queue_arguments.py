"""The queue's x-arguments as `logbroker declare queue` flags, and their listing.

One table, so `declare queue --help` (the flags) and `declare --help` (an
epilog) list the same options; `--argument KEY=VALUE` still takes any other
(or a policy's) x-argument. The broker validates the values, as RabbitMQ does.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

__all__ = ["QUEUE_OPTIONS", "add_queue_options", "queue_arguments", "queue_options_epilog"]


@dataclass(frozen=True)
class QueueOption:
    flag: str
    argument: str  # the x-argument it sets
    help: str
    kind: type = int
    metavar: str = "N"
    choices: tuple[str, ...] | None = None
    switch: bool = False  # a flag without a value: the argument is true


QUEUE_OPTIONS = (
    QueueOption("--max-length", "x-max-length", "at most N ready messages (then --overflow)"),
    QueueOption("--max-length-bytes", "x-max-length-bytes",
                "at most N bytes of ready message bodies", metavar="BYTES"),
    QueueOption("--overflow", "x-overflow", "what a full queue does: drop-head (default), "
                "reject-publish, reject-publish-dlx", kind=str, metavar="MODE",
                choices=("drop-head", "reject-publish", "reject-publish-dlx")),
    QueueOption("--message-ttl", "x-message-ttl", "messages expire after MS milliseconds",
                metavar="MS"),
    QueueOption("--expires", "x-expires", "the queue is deleted once unused for MS ms",
                metavar="MS"),
    QueueOption("--dead-letter-exchange", "x-dead-letter-exchange",
                "where expired, rejected and dropped messages go", kind=str,
                metavar="EXCHANGE"),
    QueueOption("--dead-letter-routing-key", "x-dead-letter-routing-key",
                "their routing key there (default: their own)", kind=str, metavar="KEY"),
    QueueOption("--max-priority", "x-max-priority", "a priority queue: priorities 0..N"),
    QueueOption("--single-active-consumer", "x-single-active-consumer",
                "one consumer at a time gets the messages", switch=True),
    QueueOption("--queue-type", "x-queue-type", "classic (default), quorum, stream: "
                "accepted as RabbitMQ's", kind=str, metavar="TYPE",
                choices=("classic", "quorum", "stream")),
    QueueOption("--replicas", "x-queue-replicas", "copies of the queue in a cluster"),
    QueueOption("--leader-locator", "x-queue-leader-locator",
                "which node leads it in a cluster: client-local, balanced, random", kind=str,
                metavar="WHERE", choices=("client-local", "balanced", "random")),
    QueueOption("--max-age", "x-max-age",
                "settled messages stay replayable this long, e.g. 7D, 12h", kind=str,
                metavar="AGE"),
    QueueOption("--retention-bytes", "x-retention-bytes",
                "... and up to this many bytes", metavar="BYTES"),
)


def _dest(option: QueueOption) -> str:
    return "queue_" + option.flag[2:].replace("-", "_")


def add_queue_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("queue options (x-arguments)")
    for option in QUEUE_OPTIONS:
        help_text = f"{option.help} ({option.argument})"
        if option.switch:
            group.add_argument(option.flag, dest=_dest(option), action="store_true",
                               help=help_text)
        else:
            group.add_argument(option.flag, dest=_dest(option), type=option.kind,
                               metavar=option.metavar, choices=option.choices, help=help_text)


def queue_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The x-arguments the queue option flags set."""
    out: dict[str, Any] = {}
    for option in QUEUE_OPTIONS:
        value = getattr(args, _dest(option), None)
        if value is not None and value is not False:
            out[option.argument] = value
    return out


def queue_options_epilog() -> str:
    rows = [(option.flag + ("" if option.switch else f" {option.metavar}"),
             f"{option.argument}: {option.help}") for option in QUEUE_OPTIONS]
    rows.append(("--argument KEY=VALUE", "any other x-argument (repeatable)"))
    width = max(len(flag) for flag, _ in rows) + 2
    return "\n".join(["queue options (logbroker declare queue NAME [OPTIONS]):",
                      *(f"  {flag:<{width}}{text}" for flag, text in rows)])
