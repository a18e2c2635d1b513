"""Validation of policies: the definition keys RabbitMQ accepts and their values.

Follows RabbitMQ's validators (`rabbit_policy`, `rabbit_policies`,
`rabbit_mirror_queue_misc`, the federation plugin): every key must be known,
every value well typed, and the error texts are RabbitMQ's, after its
`Validation failed` header. Keys are accepted for features other layers
implement (`ha-*` for replication, `federation-*` for federation) so that
definitions exported from RabbitMQ import unchanged.

Departure: `max-priority` is accepted (an integer 0..255), because the issue
lists it, but RabbitMQ documents priorities as argument-only ("declaring a
classic queue as a priority queue using policies is not supported by design",
rabbitmq.com/docs/3.13/priority), so `effective_queue_arguments` ignores it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from logbroker.metadata.errors import MetadataError, precondition_failed
from logbroker.metadata.field_values import erl_term, is_integer

APPLY_TO = ("all", "queues", "exchanges", "classic_queues", "quorum_queues", "streams")
HA_KEYS = (
    "ha-mode",
    "ha-params",
    "ha-sync-mode",
    "ha-sync-batch-size",
    "ha-promote-on-shutdown",
    "ha-promote-on-failure",
)
FEDERATION_KEYS = ("federation-upstream", "federation-upstream-set")
_MAX_AGE = re.compile(r"([0-9]+)(Y|M|D|h|m|s)")
_Check = Callable[[Any], bool]


def _non_negative(value: Any) -> bool:
    return is_integer(value) and value >= 0


def _one_of(*allowed: Any) -> _Check:
    return lambda value: isinstance(value, str | int) and not isinstance(value, bool) and (
        value in allowed
    )


def _max_age(value: Any) -> bool:
    match = _MAX_AGE.fullmatch(value) if isinstance(value, str) else None
    return match is not None and int(match.group(1)) > 0


# key -> (check, what an invalid value is called in RabbitMQ's message)
_SIMPLE: dict[str, tuple[_Check, str]] = {
    "alternate-exchange": (lambda v: isinstance(v, str), "a valid alternate exchange name"),
    "dead-letter-exchange": (lambda v: isinstance(v, str), "a valid dead letter exchange name"),
    "dead-letter-routing-key": (lambda v: isinstance(v, str), "a valid dead letter routing key"),
    "message-ttl": (_non_negative, "a valid message TTL"),
    "expires": (lambda v: is_integer(v) and v >= 1, "a valid queue expiry"),
    "max-length": (_non_negative, "a valid maximum length"),
    "max-length-bytes": (_non_negative, "a valid maximum length in bytes"),
    "max-in-memory-length": (_non_negative, "a valid maximum memory in bytes"),
    "max-in-memory-bytes": (_non_negative, "a valid maximum memory in bytes"),
    "max-priority": (lambda v: is_integer(v) and 0 <= v <= 255, "a valid max priority"),
    "queue-mode": (_one_of("default", "lazy"), "a valid queue-mode value"),
    "queue-version": (_one_of(1, 2), "a valid queue-version value"),
    "overflow": (_one_of("drop-head", "reject-publish", "reject-publish-dlx"),
                 "a valid overflow value"),
    "dead-letter-strategy": (_one_of("at-most-once", "at-least-once"),
                             "a valid dead letter strategy"),
    "delivery-limit": (_non_negative, "a valid delivery limit"),
    "consumer-timeout": (_non_negative, "a valid consumer timeout"),
    "max-age": (_max_age, "a valid max age"),
    "retention-bytes": (_non_negative, "a valid retention size in bytes"),
    "max-segment-size": (_non_negative, "a valid segment size"),
    "stream-max-segment-size-bytes": (_non_negative, "a valid segment size"),
    "initial-cluster-size": (_non_negative, "a valid cluster size"),
    "queue-leader-locator": (
        _one_of("client-local", "balanced", "random", "least-leaders", "min-masters"),
        "a valid queue leader locator value",
    ),
    "queue-master-locator": (
        _one_of("client-local", "balanced", "random", "min-masters"),
        "a valid queue-master-locator value",
    ),
    "federation-upstream": (lambda v: isinstance(v, str), "a valid federation upstream name"),
    "federation-upstream-set": (lambda v: isinstance(v, str),
                                "a valid federation upstream set name"),
}  # fmt: skip
KNOWN_KEYS = frozenset(_SIMPLE) | frozenset(HA_KEYS)


def validation_failed(message: str) -> MetadataError:
    return precondition_failed(f"Validation failed\n\n{message}\n")


def validate_policy(pattern: str, apply_to: str, priority: Any, definition: Any) -> None:
    """Raise MetadataError(406) unless RabbitMQ would accept this policy."""
    if not is_integer(priority):
        raise validation_failed(f"{erl_term(priority)} priority must be a number")
    try:
        re.compile(pattern)
    except re.error as error:
        raise validation_failed(
            f"<<\"{pattern}\">> is not a valid regular expression: {error}"
        ) from error
    if apply_to not in APPLY_TO:
        raise validation_failed(
            f"apply-to '{apply_to}' unrecognised; should be one of: 'queues', "
            "'classic_queues',  'quorum_queues', 'streams', 'exchanges', or 'all'"
        )
    validate_definition(definition)


def validate_definition(definition: Any) -> None:
    if not isinstance(definition, Mapping):
        raise validation_failed(f"definition must be a dictionary: {erl_term(definition)}")
    if not definition:
        raise validation_failed("no policy provided")
    unknown = [(key, value) for key, value in definition.items() if key not in KNOWN_KEYS]
    if unknown:
        listed = ",".join(f"{{{erl_term(key)},{erl_term(value)}}}" for key, value in unknown)
        raise validation_failed(f"[{listed}] are not recognised policy settings")
    for key, value in definition.items():
        simple = _SIMPLE.get(key)
        if simple is not None and not simple[0](value):
            raise validation_failed(f"{erl_term(value)} is not {simple[1]}")
    if all(key in definition for key in FEDERATION_KEYS):
        raise validation_failed(
            "federation-upstream and federation-upstream-set are mutually exclusive"
        )
    _validate_ha(definition)


def _validate_ha(definition: Mapping[str, Any]) -> None:
    """`rabbit_mirror_queue_misc:validate_policy/1`."""
    present = {key: definition[key] for key in HA_KEYS if key in definition}
    if not present:
        return
    mode = present.get("ha-mode")
    if mode is None:
        raise validation_failed(
            "ha-mode must be specified to specify ha-params, ha-sync-mode or "
            "ha-promote-on-shutdown"
        )
    _validate_ha_mode(mode, present.get("ha-params"), "ha-params" in present)
    sync_mode = present.get("ha-sync-mode", "manual")
    if sync_mode not in ("manual", "automatic"):
        raise validation_failed(
            f'ha-sync-mode must be "manual" or "automatic", got {erl_term(sync_mode)}'
        )
    batch = present.get("ha-sync-batch-size", 1)
    if not (is_integer(batch) and batch > 0):
        raise validation_failed(
            f"ha-sync-batch-size takes an integer greater than 0, {erl_term(batch)} given"
        )
    for key in ("ha-promote-on-shutdown", "ha-promote-on-failure"):
        value = present.get(key, "when-synced")
        if value not in ("when-synced", "always"):
            raise validation_failed(
                f'{key} must be "always" or "when-synced", got {erl_term(value)}'
            )


def _validate_ha_mode(mode: Any, params: Any, has_params: bool) -> None:
    shown = erl_term(params) if has_params else "none"
    if mode == "all":
        if has_params:
            raise validation_failed('ha-mode="all" does not take parameters')
    elif mode == "exactly":
        if not (is_integer(params) and params > 0):
            raise validation_failed(f'ha-mode="exactly" takes an integer, {shown} given')
    elif mode == "nodes":
        if not isinstance(params, list):
            raise validation_failed(f'ha-mode="nodes" takes a list, {shown} given')
        if not params:
            raise validation_failed('ha-mode="nodes" list must be non-empty')
        invalid = [item for item in params if not isinstance(item, str)]
        if invalid:
            raise validation_failed(
                f'ha-mode="nodes" takes a list of strings, {erl_term(invalid)} was not a string'
            )
    else:
        raise validation_failed(f"{erl_term(mode)} is not a valid ha-mode value")
