"""What every client subcommand shares: connection flags, argument parsing helpers, output.

`--url` (several comma-separated URLs for failover; else `LOGBROKER_URL`, else
the local node with guest/guest), `--vhost` and `--timeout` may come before the
subcommand or after it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import time
from collections.abc import Sequence
from typing import IO, Any

URL_HELP = ("broker URL http://USER:PASS@HOST:PORT; several, comma-separated, for failover "
            "(default: $LOGBROKER_URL, else http://guest:guest@127.0.0.1:15672)")
# For https:// URLs: (flag, environment variable, what it is).
TLS_FLAGS = (
    ("--ca-file", "LOGBROKER_CA_FILE", "CA bundle that https:// brokers' certificates "
                                       "must chain to (else the system's CAs)"),
    ("--cert-file", "LOGBROKER_CERT_FILE", "client certificate for https:// brokers "
                                           "that ask for one"),
    ("--key-file", "LOGBROKER_KEY_FILE", "the client certificate's private key"),
)
_RELATIVE = re.compile(r"^-?(\d+(?:\.\d+)?)(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


class UsageError(Exception):
    """A bad command line the parser could not catch: exit code 2."""


def add_connection_flags(parser: argparse.ArgumentParser, top_level: bool) -> None:
    """The flags on the top-level parser (with defaults) and on each subcommand (no default,
    so a flag given before the subcommand is not overwritten)."""
    def default(value: Any) -> Any:
        return value if top_level else argparse.SUPPRESS

    group = parser.add_argument_group("connection")
    group.add_argument("--url", default=default(None), help=URL_HELP)
    group.add_argument("--vhost", default=default("/"), help="virtual host (default: /)")
    group.add_argument("--timeout", type=float, default=default(30.0), metavar="SECONDS",
                       help="per-request timeout (default: 30)")
    for flag, variable, what in TLS_FLAGS:
        group.add_argument(flag, default=default(None), metavar="FILE",
                           help=f"{what} (default: ${variable})")


def connection_parent() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    add_connection_flags(parent, top_level=False)
    return parent


def json_value(text: str) -> Any:
    """A JSON literal if it is one (10, true, "x", {...}), else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def key_values(items: Sequence[str] | None, what: str = "argument") -> dict[str, Any]:
    """KEY=VALUE pairs; each VALUE is parsed as JSON when it is JSON, else kept as text."""
    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--{what} wants KEY=VALUE, not {item!r}")
        out[key] = json_value(value)
    return out


def json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise UsageError(f"{what} is not valid JSON: {error}") from error
    if not isinstance(value, dict):
        raise UsageError(f"{what} must be a JSON object")
    return value


def parse_time(text: str, now_ms: int | None = None) -> int:
    """Milliseconds since the epoch from: an ISO 8601 time (local time if no zone), an integer
    (seconds if it has at most 10 digits, else milliseconds), `now`, or an age such as
    `-90s`, `15m`, `2h`, `1d` (that long ago)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    value = text.strip()
    if value == "now":
        return now
    if value.isdigit():
        number = int(value)
        return number * 1000 if len(value) <= 10 else number
    relative = _RELATIVE.match(value)
    if relative:
        return max(0, now - int(float(relative.group(1)) * _UNIT_MS[relative.group(2)]))
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(f"--from-time: cannot read {text!r} as a time (ISO 8601 such as "
                         f"2024-05-01T12:00:00Z, epoch seconds or ms, or an age such as "
                         f"-15m)") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return max(0, int(moment.timestamp() * 1000))


def text_of(body: bytes) -> str:
    return body.decode("utf-8", "backslashreplace")


def write_line(out: IO[bytes], line: str) -> None:
    out.write(line.encode("utf-8", "surrogateescape") + b"\n")


PROGRESS_DELAY_S = 1.0  # a bar appears only on runs that take longer


def progress_bar(total: int, unit: str) -> Any:
    """A tqdm bar on stderr (the output may be stdout), shown after `PROGRESS_DELAY_S`."""
    from tqdm import tqdm  # type: ignore[import-untyped]  # only when a bar is shown

    return tqdm(total=total, unit=unit, unit_scale=True, file=sys.stderr,
                delay=PROGRESS_DELAY_S, dynamic_ncols=True, leave=True)
