"""Validation of a new queue's or exchange's arguments, as RabbitMQ's declare does it.

Queues: `rabbit_channel` first checks that `x-dead-letter-exchange` is a string
(`invalid type 'signedint' for arg 'x-dead-letter-exchange' in queue 'q' in
vhost '/'`), then `rabbit_amqqueue:check_declare_arguments/2` runs one
validator per known argument and reports the first failure as `invalid arg
'x-max-length' for queue 'q' in vhost '/': {value_negative,-1}` (the Erlang
error term as `~255p` prints it). Unknown arguments are kept and ignored.
Only new queues are validated: redeclaring an existing queue compares instead.

Exchanges: `alternate-exchange` must be a string (same `invalid type` text).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from logbroker.metadata.errors import precondition_failed, rs
from logbroker.metadata.field_values import amqp_type_name, is_integer

MAX_EXPIRY = 4294967295  # ?MAX_EXPIRY_TIMER
MAX_PRIORITY = 255
QUEUE_TYPES = ("classic", "quorum", "stream")
LEADER_LOCATORS = ("client-local", "balanced", "random", "least-leaders", "min-masters")
_MAX_AGE = re.compile(r"([0-9]*)(.*)")
_Validator = Callable[[Any, Mapping[str, Any]], str | None]


def _unacceptable(value: Any) -> str:
    return f"{{unacceptable_type,{amqp_type_name(value)}}}"


def _int(value: Any, _: Mapping[str, Any]) -> str | None:
    return None if is_integer(value) else _unacceptable(value)


def _non_negative(value: Any, args: Mapping[str, Any]) -> str | None:
    error = _int(value, args)
    if error is None and value < 0:
        return f"{{value_negative,{value}}}"
    return error


def _expiry(value: int) -> str | None:
    if value < 0:
        return f"{{value_negative,{value}}}"
    if value > MAX_EXPIRY:
        return f"{{value_too_large,{value}}}"
    return None


def _expires(value: Any, args: Mapping[str, Any]) -> str | None:
    error = _int(value, args)
    if error is None:
        return "{value_zero,0}" if value == 0 else _expiry(value)
    return error


def _message_ttl(value: Any, args: Mapping[str, Any]) -> str | None:
    error = _int(value, args)
    return _expiry(value) if error is None else error


def _max_priority(value: Any, args: Mapping[str, Any]) -> str | None:
    error = _non_negative(value, args)
    if error is None and value > MAX_PRIORITY:
        return f"{{max_value_exceeded,{value}}}"
    return error


def _positive(value: Any, args: Mapping[str, Any]) -> str | None:
    error = _non_negative(value, args)
    return "{value_zero,0}" if error is None and value == 0 else error


def _string(value: Any, _: Mapping[str, Any]) -> str | None:
    return None if isinstance(value, str) else _unacceptable(value)


def _dlx_routing_key(value: Any, args: Mapping[str, Any]) -> str | None:
    if not isinstance(value, str):
        return _unacceptable(value)
    return None if "x-dead-letter-exchange" in args else "routing_key_but_no_dlx_defined"


def _one_of(allowed: tuple[Any, ...], error: str) -> _Validator:
    def check(value: Any, _: Mapping[str, Any]) -> str | None:
        if not isinstance(value, type(allowed[0])) or isinstance(value, bool):
            return _unacceptable(value)
        return None if value in allowed else error.format(value=value)

    return check


def _bool(value: Any, _: Mapping[str, Any]) -> str | None:
    return None if isinstance(value, bool) else _unacceptable(value)


def _max_age(value: Any, _: Mapping[str, Any]) -> str | None:
    if not isinstance(value, str):
        return _unacceptable(value)
    match = _MAX_AGE.fullmatch(value)
    digits, unit = (match.group(1), match.group(2)) if match else ("", "")
    valid = digits.isdigit() and int(digits) > 0 and unit in ("Y", "M", "D", "h", "m", "s")
    return None if valid else "invalid_max_age"


QUEUE_VALIDATORS: dict[str, _Validator] = {
    "x-expires": _expires,
    "x-message-ttl": _message_ttl,
    "x-dead-letter-exchange": _string,
    "x-dead-letter-routing-key": _dlx_routing_key,
    "x-dead-letter-strategy": _one_of(("at-most-once", "at-least-once"), "invalid_dlx_strategy"),
    "x-max-length": _non_negative,
    "x-max-length-bytes": _non_negative,
    "x-max-priority": _max_priority,
    "x-overflow": _one_of(("drop-head", "reject-publish", "reject-publish-dlx"),
                          "invalid_overflow"),
    "x-queue-mode": _one_of(("default", "lazy"), "\"unsupported queue mode '{value}'\""),
    "x-queue-version": _one_of((1, 2), "\"unsupported queue version '{value}'\""),
    "x-single-active-consumer": _bool,
    "x-queue-type": _one_of(QUEUE_TYPES, "\"unsupported queue type '{value}'\""),
    "x-max-age": _max_age,
    "x-retention-bytes": _non_negative,
    "x-delivery-limit": _non_negative,
    "x-queue-leader-locator": _one_of(LEADER_LOCATORS, "invalid_queue_locator_arg"),
    "x-queue-master-locator": _one_of(LEADER_LOCATORS, "invalid_queue_locator_arg"),
    "x-queue-replicas": _positive,
}  # fmt: skip


def _check_name_type(arguments: Mapping[str, Any], key: str, resource: str) -> None:
    value = arguments.get(key)
    if value is not None and not isinstance(value, str):
        raise precondition_failed(
            f"invalid type '{amqp_type_name(value)}' for arg '{key}' in {resource}"
        )


def validate_queue_arguments(vhost: str, name: str, arguments: Mapping[str, Any]) -> None:
    """Raise 406 PRECONDITION_FAILED for the first argument RabbitMQ would refuse."""
    resource = rs("queue", vhost, name)
    _check_name_type(arguments, "x-dead-letter-exchange", resource)
    for key, validator in QUEUE_VALIDATORS.items():
        if key in arguments:
            error = validator(arguments[key], arguments)
            if error is not None:
                raise precondition_failed(f"invalid arg '{key}' for {resource}: {error}")


def validate_exchange_arguments(vhost: str, name: str, arguments: Mapping[str, Any]) -> None:
    _check_name_type(arguments, "alternate-exchange", rs("exchange", vhost, name))
