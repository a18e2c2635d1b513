"""The federation plugin's runtime parameters: upstreams and upstream sets, as RabbitMQ checks them.

`federation-upstream` NAME: an object with `uri` (an AMQP URI or a list of them,
tried in turn) and optional link settings (`prefetch-count`, `reconnect-delay`,
`ack-mode`, `trust-user-id`, `exchange`, `queue`, `max-hops`, `expires`,
`message-ttl`, `consumer-tag`, and RabbitMQ's `queue-type`, `ha-policy`,
`bind-nowait`, `resource-cleanup-mode`). `federation-upstream-set` NAME: a list
of `{"upstream": NAME, ...overrides}`. The implicit set `all` names every upstream
of the vhost and cannot be defined. A key that is not known, or a value of the
wrong type, is refused naming the key, so nothing half-configured is recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from logbroker.metadata.errors import precondition_failed

__all__ = ["ACK_MODES", "IMPLICIT_SET", "validate_upstream", "validate_upstream_set"]

ACK_MODES = ("on-confirm", "on-publish", "no-ack")
IMPLICIT_SET = "all"
URI_SCHEMES = ("amqp", "amqps")


def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


Check = Callable[[Any], bool]
# key -> (check, what a valid value is)
_LINK_KEYS: dict[str, tuple[Check, str]] = {
    "prefetch-count": (lambda v: _is_int(v) and v >= 0, "a non-negative integer"),
    "reconnect-delay": (lambda v: _is_number(v) and v >= 0, "a non-negative number (s)"),
    "ack-mode": (lambda v: v in ACK_MODES, f"one of {', '.join(ACK_MODES)}"),
    "trust-user-id": (lambda v: isinstance(v, bool), "true or false"),
    "exchange": (lambda v: isinstance(v, str), "an exchange name"),
    "queue": (lambda v: isinstance(v, str), "a queue name"),
    "max-hops": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "expires": (lambda v: _is_int(v) and v >= 1, "a positive integer (ms)"),
    "message-ttl": (lambda v: _is_int(v) and v >= 0, "a non-negative integer (ms)"),
    "consumer-tag": (lambda v: isinstance(v, str), "a consumer tag"),
    "queue-type": (lambda v: v in ("classic", "quorum"), "classic or quorum"),
    "ha-policy": (lambda v: isinstance(v, str), "a string"),
    "bind-nowait": (lambda v: isinstance(v, bool), "true or false"),
    "resource-cleanup-mode": (lambda v: v in ("default", "never"), "default or never"),
}


def check_uri(uri: Any, what: str = "federation upstream 'uri'") -> None:
    if not isinstance(uri, str) or not uri:
        raise precondition_failed(f"{what} must be an AMQP URI or a list of them")
    parts = urlsplit(uri)
    if parts.scheme not in URI_SCHEMES or not parts.hostname:
        raise precondition_failed(f"{what} {_redacted(uri)!r} is not an amqp:// or amqps:// "
                                  f"URI with a host")
    try:
        parts.port  # noqa: B018 -- raises for a port that is not a number
    except ValueError:
        raise precondition_failed(f"{what} {_redacted(uri)!r} has a bad port") from None


def _redacted(uri: str) -> str:
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    return uri.replace(f":{parts.password}@", ":***@", 1)


def _check_link_keys(definition: Mapping[str, Any], allowed: frozenset[str]) -> None:
    for key, value in definition.items():
        if key not in allowed:
            raise precondition_failed(f"unknown federation upstream key '{key}'")
        if key in _LINK_KEYS:
            check, what = _LINK_KEYS[key]
            if not check(value):
                raise precondition_failed(f"federation upstream key '{key}' must be {what}, "
                                          f"not {value!r}")


UPSTREAM_KEYS = frozenset(_LINK_KEYS) | {"uri"}


def validate_upstream(name: str, value: Any) -> None:
    if not isinstance(value, Mapping):
        raise precondition_failed("a federation upstream must be a JSON object")
    if "uri" not in value:
        raise precondition_failed(f"federation upstream '{name}' needs a 'uri'")
    uris = value["uri"]
    for uri in uris if isinstance(uris, list) and uris else [uris]:
        check_uri(uri)
    _check_link_keys(value, UPSTREAM_KEYS)


def validate_upstream_set(name: str, value: Any) -> None:
    if name == IMPLICIT_SET:
        raise precondition_failed(f"the upstream set '{IMPLICIT_SET}' is implicit (every "
                                  f"upstream of the vhost): it cannot be defined")
    if not isinstance(value, list) or not value:
        raise precondition_failed("a federation upstream set must be a non-empty JSON list "
                                  'of {"upstream": NAME, ...}')
    for member in value:
        if not isinstance(member, Mapping) or not isinstance(member.get("upstream"), str):
            raise precondition_failed('every member of an upstream set must be an object '
                                      'with an "upstream" name')
        overrides = {key: item for key, item in member.items() if key != "upstream"}
        if "uri" in overrides:
            uris = overrides["uri"]
            for uri in uris if isinstance(uris, list) and uris else [uris]:
                check_uri(uri)
        _check_link_keys(overrides, UPSTREAM_KEYS)
