"""Redeclaration checks: is a declare equivalent to what exists? (RabbitMQ's rules)

Queues (`rabbit_amqqueue:perform_full_equivalence_checks/5`): exclusive access
first (405 RESOURCE_LOCKED when the queue is exclusive to another connection,
or when only one of the two declarations is exclusive), then `durable`, then
`auto_delete`, then the arguments in `QUEUE_ARGUMENTS_COMPARED`, in that order
(the classic queue type's `queue_arguments`, plus the ones this broker adds).
Other arguments are not compared, as in RabbitMQ.

Exchanges (`rabbit_exchange:assert_equivalence/6`): `type`, `durable`,
`auto_delete`, `internal`, then arguments, of which RabbitMQ compares only
`alternate-exchange` ("The only arg we care about"), and so do we.

Texts are `rabbit_misc:equivalence_fail/4`'s: `inequivalent arg 'durable' for
queue 'q' in vhost '/': received 'true' but current is 'false'`; an argument
present on one side only shows as `the value '10' of type 'signedint'` or
`none`. Arguments compare by type class and value (`amqp_equal`); a missing
`x-queue-type` equals `classic` (rabbitmq-common#341).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from logbroker.metadata.errors import MetadataError, precondition_failed, resource_locked, rs
from logbroker.metadata.field_values import amqp_equal, amqp_type_name, erl_format
from logbroker.metadata.records import ExchangeRecord, QueueRecord

QUEUE_ARGUMENTS_COMPARED = (
    "x-expires",
    "x-message-ttl",
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-max-length",
    "x-max-length-bytes",
    "x-max-priority",
    "x-overflow",
    "x-queue-mode",
    "x-queue-version",
    "x-single-active-consumer",
    "x-queue-type",
    "x-queue-master-locator",
    "x-queue-leader-locator",
    "x-delivery-limit",
    "x-dead-letter-strategy",
    "x-max-age",
    "x-queue-replicas",
)
EXCHANGE_ARGUMENTS_COMPARED = ("alternate-exchange",)
_MISSING = object()


def _shown(value: Any) -> str:
    return f"'{erl_format(value)}'"


def _shown_typed(value: Any) -> str:
    if value is _MISSING:
        return "none"
    return f"the value '{erl_format(value)}' of type '{amqp_type_name(value)}'"


def _fail(field_name: str, resource: str, received: str, current: str) -> MetadataError:
    return precondition_failed(
        f"inequivalent arg '{field_name}' for {resource}: received {received} but current is "
        f"{current}"
    )


def assert_field_equivalent(current: Any, received: Any, resource: str, field_name: str) -> None:
    if current != received:
        raise _fail(field_name, resource, _shown(received), _shown(current))


def assert_args_equivalent(
    current: Mapping[str, Any], received: Mapping[str, Any], resource: str, keys: Sequence[str]
) -> None:
    """`rabbit_misc:assert_args_equivalence/4` over `keys`."""
    for key in keys:
        old, new = current.get(key, _MISSING), received.get(key, _MISSING)
        if old is _MISSING and new is _MISSING:
            continue
        if key == "x-queue-type" and {_text(old), _text(new)} <= {"classic", None}:
            continue
        if old is _MISSING or new is _MISSING:
            raise _fail(key, resource, _shown_typed(new), _shown_typed(old))
        if not amqp_equal(old, new):
            raise _fail(key, resource, _shown(new), _shown(old))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None if value is _MISSING else "?"


def assert_queue_equivalent(
    queue: QueueRecord,
    durable: bool,
    auto_delete: bool,
    arguments: Mapping[str, Any],
    owner: str | None,
) -> None:
    """Raise 405/406 unless this declare of an existing queue is equivalent."""
    if queue.exclusive_owner != owner:
        raise resource_locked(queue.vhost, queue.name)
    resource = rs("queue", queue.vhost, queue.name)
    assert_field_equivalent(queue.durable, durable, resource, "durable")
    assert_field_equivalent(queue.auto_delete, auto_delete, resource, "auto_delete")
    assert_args_equivalent(queue.arguments, arguments, resource, QUEUE_ARGUMENTS_COMPARED)


def assert_exchange_equivalent(
    exchange: ExchangeRecord,
    exchange_type: str,
    durable: bool,
    auto_delete: bool,
    internal: bool,
    arguments: Mapping[str, Any],
) -> None:
    resource = rs("exchange", exchange.vhost, exchange.name)
    assert_field_equivalent(exchange.type, exchange_type, resource, "type")
    assert_field_equivalent(exchange.durable, durable, resource, "durable")
    assert_field_equivalent(exchange.auto_delete, auto_delete, resource, "auto_delete")
    assert_field_equivalent(exchange.internal, internal, resource, "internal")
    assert_args_equivalent(exchange.arguments, arguments, resource, EXCHANGE_ARGUMENTS_COMPARED)
