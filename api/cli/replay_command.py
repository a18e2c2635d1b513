"""`logbroker replay QUEUE --from-offset N | --from-time T [--to-offset M] [--follow]`.

Reads the queue's log without consuming: messages already consumed and acked
read back as long as retention keeps them. One message per line: the body as
text (invalid UTF-8 escaped with backslashes) or, with `--format json`, a JSON
object with offset, timestamp, exchange, routing key, properties and body
(base64 with `"body_encoding": "base64"` when not UTF-8). Without `--follow`
it reads REST pages up to the end of the log (or `--to-offset`, exclusive),
with a progress bar on stderr when writing to `--output`; with `--follow` it
keeps streaming new messages over a WebSocket until Ctrl-C (exit 0).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from api.cli.options import UsageError, parse_time, progress_bar, text_of, write_line

if TYPE_CHECKING:  # the parser imports this module for its usage text: no httpx
    from api.client import Client, Record, ReplayPage


def record_line(record: Record, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(record.to_json(), ensure_ascii=False)
    return text_of(record.body)


def _start(args: argparse.Namespace) -> dict[str, int | None]:
    if args.from_time is not None:
        return {"from_offset": None, "from_timestamp": parse_time(args.from_time)}
    if args.from_offset < 0:
        raise UsageError("--from-offset must not be negative")
    return {"from_offset": args.from_offset, "from_timestamp": None}


@contextlib.contextmanager
def _output(path: str | None) -> Iterator[IO[bytes]]:
    if path is None or path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    try:
        stream = open(path, "wb")  # noqa: SIM115 -- closed below
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}") from error
    with stream:
        yield stream


def replay(client: Client, args: argparse.Namespace) -> int:
    start = _start(args)
    if args.to_offset is not None and args.to_offset < 0:
        raise UsageError("--to-offset must not be negative")
    with _output(args.output) as out:
        if args.follow:
            return _follow(client, args, start, out)
        to_file = args.output not in (None, "-")
        _pages(client, args, start, out, progress=to_file and not args.no_progress)
    return 0


def _follow(client: Client, args: argparse.Namespace, start: dict[str, Any],
            out: IO[bytes]) -> int:
    stream = client.follow(args.queue, to_offset=args.to_offset, **start)
    try:
        for record in stream:
            write_line(out, record_line(record, args.format))
            out.flush()
    except KeyboardInterrupt:
        pass
    finally:
        with contextlib.suppress(Exception, KeyboardInterrupt):
            stream.close()
    return 0


def _pages(client: Client, args: argparse.Namespace, start: dict[str, Any], out: IO[bytes],
           progress: bool) -> None:
    bar: Any = None
    done = 0
    origin: int | None = None
    page: ReplayPage | None = None
    try:
        for page in client.replay_pages(args.queue, to_offset=args.to_offset,
                                        page_size=args.page_size, **start):
            for record in page.records:
                write_line(out, record_line(record, args.format))
            if origin is None:
                origin = page.records[0].offset if page.records else page.next_offset
                if progress:
                    bar = progress_bar(_total(page, origin, args.to_offset), "msg")
            if bar is not None:
                bar.total = max(bar.total or 0, _total(page, origin, args.to_offset))
                bar.update(page.next_offset - origin - done)
                done = page.next_offset - origin
    finally:
        if bar is not None:
            bar.close()
    offset = start["from_offset"]
    if page is not None and offset is not None and offset > page.end_offset:
        # Nothing to print is not an answer: say why (exit 0, as for an empty range).
        print(f"logbroker: offset {offset} is past the end (end_offset {page.end_offset})",
              file=sys.stderr)


def _total(page: ReplayPage, origin: int, to_offset: int | None) -> int:
    stop = page.end_offset if to_offset is None else min(to_offset, page.end_offset)
    return max(0, stop - origin)
