"""Dynamic shovels as runtime parameters (component `shovel`), checked as RabbitMQ's plugin does.

A shovel moves messages from a source (`src-uri` + `src-queue`, or `src-exchange`
with `src-exchange-key`) to a destination (`dest-uri` + `dest-queue`, or
`dest-exchange` with an optional `dest-exchange-key`). URIs are AMQP URIs (or
lists, tried in turn); an URI without a host means this broker (RabbitMQ's direct
connection): `amqp://` its default vhost `/`, `amqp:///VHOST` that vhost. Optional:
`ack-mode` (`on-confirm`, `on-publish`, `no-ack`), `src-delete-after` (`never`,
`queue-length`, or a count), `src-prefetch-count` (or `prefetch-count`),
`reconnect-delay`, `add-forward-headers`, `dest-add-timestamp-header`, and the
protocols (`amqp091` only). A wrong key or type is refused naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from logbroker.metadata.errors import precondition_failed
from logbroker.metadata.federation_parameters import ACK_MODES, check_uri

__all__ = ["DEFAULT_VHOST", "local_vhost", "validate_shovel"]

DEFAULT_VHOST = "/"

_KEYS: dict[str, tuple[Any, str]] = {
    "src-queue": (lambda v: isinstance(v, str), "a queue name"),
    "src-exchange": (lambda v: isinstance(v, str), "an exchange name"),
    "src-exchange-key": (lambda v: isinstance(v, str), "a routing key"),
    "dest-queue": (lambda v: isinstance(v, str), "a queue name"),
    "dest-exchange": (lambda v: isinstance(v, str), "an exchange name"),
    "dest-exchange-key": (lambda v: isinstance(v, str), "a routing key"),
    "ack-mode": (lambda v: v in ACK_MODES, f"one of {', '.join(ACK_MODES)}"),
    "src-delete-after": (lambda v: v in ("never", "queue-length")
                         or (type(v) is int and v >= 0), "never, queue-length or a count"),
    "src-prefetch-count": (lambda v: type(v) is int and v >= 1, "a positive integer"),
    "prefetch-count": (lambda v: type(v) is int and v >= 1, "a positive integer"),
    "reconnect-delay": (lambda v: type(v) in (int, float) and v >= 0,
                        "a non-negative number (s)"),
    "add-forward-headers": (lambda v: isinstance(v, bool), "true or false"),
    "dest-add-timestamp-header": (lambda v: isinstance(v, bool), "true or false"),
    "src-protocol": (lambda v: v == "amqp091", "amqp091"),
    "dest-protocol": (lambda v: v == "amqp091", "amqp091"),
}


def local_vhost(uri: str) -> str | None:
    """The vhost of this broker an URI without a host names (`amqp://`: the default
    vhost; `amqp:///v`: v), or None for an URI that names a host."""
    parts = urlsplit(uri)
    if parts.scheme != "amqp" or parts.netloc:
        return None
    path = unquote(parts.path[1:]) if parts.path.startswith("/") else ""
    return path or DEFAULT_VHOST


def _uris(value: Any, key: str) -> None:
    uris = value if isinstance(value, list) and value else [value]
    for uri in uris:
        if isinstance(uri, str) and local_vhost(uri) is not None:
            continue
        if not isinstance(uri, str):
            raise precondition_failed(f"shovel '{key}' must be an AMQP URI or a list of them")
        check_uri(uri, f"shovel '{key}'")


def validate_shovel(name: str, value: Any) -> None:
    if not isinstance(value, Mapping):
        raise precondition_failed("a shovel must be a JSON object")
    for key in ("src-uri", "dest-uri"):
        if key not in value:
            raise precondition_failed(f"shovel '{name}' needs '{key}'")
    _uris(value["src-uri"], "src-uri")
    _uris(value["dest-uri"], "dest-uri")
    if ("src-queue" in value) == ("src-exchange" in value):
        raise precondition_failed("a shovel takes from 'src-queue' or from 'src-exchange', "
                                  "one of them")
    if ("dest-queue" in value) and ("dest-exchange" in value):
        raise precondition_failed("a shovel sends to 'dest-queue' or to 'dest-exchange', "
                                  "not both")
    for key, item in value.items():
        if key in ("src-uri", "dest-uri"):
            continue
        if key not in _KEYS:
            raise precondition_failed(f"unknown shovel key '{key}'")
        check, what = _KEYS[key]
        if not check(item):
            raise precondition_failed(f"shovel key '{key}' must be {what}, not {item!r}")
