"""Data-plane subcommands: publish (with confirms), get, consume."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from itertools import islice
from typing import IO, Any

from api.cli.options import UsageError, key_values, progress_bar, text_of, write_line
from api.client import Client, OutgoingMessage, PublishResult, SyncConsumer, SyncDelivery
from api.client.messages import body_json


def lines_of(stream: IO[bytes]) -> Iterator[bytes]:
    """One message per line; the newline (and a CR before it) is not part of the body."""
    for line in stream:
        if line.endswith(b"\n"):
            line = line[:-1]
            if line.endswith(b"\r"):
                line = line[:-1]
        yield line


def _bodies(args: argparse.Namespace) -> Iterator[bytes]:
    if args.messages:
        if args.file:
            raise UsageError("give messages as arguments or --file, not both")
        yield from (m.encode("utf-8", "surrogateescape") for m in args.messages)
    elif args.file and args.file != "-":
        try:
            stream = open(args.file, "rb")  # noqa: SIM115 -- closed below, read lazily
        except OSError as error:
            raise UsageError(f"cannot read {args.file}: {error.strerror or error}") from error
        with stream:
            yield from lines_of(stream)
    else:
        yield from lines_of(sys.stdin.buffer)


def _properties(args: argparse.Namespace) -> dict[str, Any]:
    properties = key_values(args.property, "property")
    headers = key_values(args.header, "header")
    if headers:
        properties["headers"] = {**properties.get("headers", {}), **headers}
    if args.content_type:
        properties["content_type"] = args.content_type
    if args.persistent:
        properties["delivery_mode"] = 2
    return properties


def publish(client: Client, args: argparse.Namespace) -> int:
    """Publish messages with confirms (`api.cli.parser.PUBLISH_DESCRIPTION` says from where)."""
    properties = _properties(args)
    bodies = _bodies(args)
    bar = _file_progress(args)
    results: list[PublishResult] = []
    try:
        while batch := list(islice(bodies, args.batch_size)):
            messages = [OutgoingMessage(args.routing_key, body, properties) for body in batch]
            results += client.publish_batch(args.exchange, messages,
                                            batch_size=args.batch_size)
            if bar is not None:
                bar.update(sum(len(body) + 1 for body in batch))  # +1: the newline
    finally:
        if bar is not None:
            bar.close()
    return _report(results, args.mandatory)


def _file_progress(args: argparse.Namespace) -> Any:
    """A bar over the file's bytes, for `--file` when stderr is a terminal."""
    if args.messages or not args.file or args.file == "-" or not sys.stderr.isatty():
        return None
    try:
        size = os.path.getsize(args.file)
    except OSError:
        return None  # _bodies says why it cannot be read
    return progress_bar(size, "B")


def _report(results: list[PublishResult], mandatory: bool) -> int:
    refused = [r for r in results if not r.confirmed]
    unroutable = [r for r in results if r.confirmed and not r.routed]
    confirmed = len(results) - len(refused)
    summary = f"published {len(results)} message{'s' * (len(results) != 1)}: " \
              f"{confirmed} confirmed"
    if unroutable:
        summary += f", {len(unroutable)} unroutable"
    print(summary)
    if refused:
        print(f"logbroker: {len(refused)} of {len(results)} messages were not confirmed: "
              f"{refused[0].reason or 'nacked'}", file=sys.stderr)
        return 1
    if unroutable and mandatory:
        print(f"logbroker: {len(unroutable)} of {len(results)} messages were unroutable "
              f"(no queue bound for the routing key)", file=sys.stderr)
        return 1
    return 0


def message_line(fmt: str, body: bytes, fields: dict[str, Any]) -> str:
    if fmt == "text":
        return text_of(body)
    return json.dumps({**fields, **body_json(body)}, ensure_ascii=False, sort_keys=False)


def get(client: Client, args: argparse.Namespace) -> int:
    ackmode = "ack_requeue_false" if args.ack else "ack_requeue_true"
    out = sys.stdout.buffer
    got = client.get(args.queue, args.count, ackmode=ackmode)
    for message in got:
        write_line(out, message_line(args.format, message.body, {
            "exchange": message.exchange, "routing_key": message.routing_key,
            "redelivered": message.redelivered, "message_count": message.message_count,
            "properties": message.properties}))
    out.flush()
    if not got:  # stdout stays empty (scripts read it); a person is told why
        print(f"logbroker: queue {args.queue!r} is empty", file=sys.stderr)
    return 0


def consume(client: Client, args: argparse.Namespace) -> int:
    """Print deliveries as they come, acking each once printed; Ctrl-C stops (exit 0).

    With --count N the broker must not deliver more than N: the prefetch window is at
    most N, and the last `prefetch` deliveries are acked only at the end, so no slot
    frees up for an N+1th (it would come back redelivered to the next consumer).
    """
    prefetch = min(args.prefetch, args.count) if args.count else args.prefetch
    held: list[SyncDelivery] = []
    with client.consume(args.queue, prefetch=prefetch, no_ack=args.no_ack) as consumer:
        with contextlib.suppress(KeyboardInterrupt):
            _print_deliveries(consumer, args, prefetch, held)
        if held:
            consumer.cancel()  # no delivery past the count once the window frees
            held[-1].ack(multiple=True)
    return 0


def _print_deliveries(consumer: SyncConsumer, args: argparse.Namespace, prefetch: int,
                      held: list[SyncDelivery]) -> None:
    received = 0
    out = sys.stdout.buffer
    while not args.count or received < args.count:
        delivery = consumer.next(args.idle_timeout)
        if delivery is None:
            return
        write_line(out, message_line(args.format, delivery.body, {
            "delivery_tag": delivery.delivery_tag, "offset": delivery.offset,
            "redelivered": delivery.redelivered, "exchange": delivery.exchange,
            "routing_key": delivery.routing_key, "properties": delivery.properties}))
        out.flush()
        received += 1
        if args.no_ack:
            continue
        if args.count and args.count - received < prefetch:
            held.append(delivery)
        else:
            delivery.ack()
