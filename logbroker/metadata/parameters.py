"""Runtime parameters: named JSON values per vhost and component, as RabbitMQ keeps them.

RabbitMQ stores its plugins' settings and the vhost limits as runtime
parameters: `(vhost, component, name) -> value`, set and cleared at runtime,
replicated with the definitions and exported with them. Here they are metadata
commands (`SetParameter`, `ClearParameter`), so a cluster agrees on them.

Each component has a validator: a parameter of an unknown component, or a value
its component refuses, is a 400-class error before anything is recorded:
`vhost-limits` (name `limits`: `max-connections`, `max-queues`, integers; a
negative value means no limit, as in RabbitMQ), `federation-upstream` and
`federation-upstream-set` (federation_parameters), `shovel` (shovel_parameters).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from logbroker.metadata.errors import MetadataError, precondition_failed
from logbroker.metadata.federation_parameters import validate_upstream, validate_upstream_set
from logbroker.metadata.reply_codes import NOT_FOUND
from logbroker.metadata.shovel_parameters import validate_shovel

__all__ = [
    "FEDERATION_UPSTREAM",
    "FEDERATION_UPSTREAM_SET",
    "SHOVEL",
    "VHOST_LIMITS",
    "VHOST_LIMIT_KEYS",
    "is_known_component",
    "limit_value",
    "register_component",
    "validate_parameter",
]

VHOST_LIMITS = "vhost-limits"
FEDERATION_UPSTREAM = "federation-upstream"
FEDERATION_UPSTREAM_SET = "federation-upstream-set"
SHOVEL = "shovel"
VHOST_LIMITS_NAME = "limits"
VHOST_LIMIT_KEYS = ("max-connections", "max-queues")

Validator = Callable[[str, Any], None]  # (name, JSON value); raises MetadataError
_VALIDATORS: dict[str, Validator] = {}


def register_component(component: str, validator: Validator) -> None:
    _VALIDATORS[component] = validator


def is_known_component(component: str) -> bool:
    return component in _VALIDATORS


def validate_parameter(component: str, name: str, value: Any) -> None:
    validator = _VALIDATORS.get(component)
    if validator is None:
        raise MetadataError(NOT_FOUND, f"no runtime parameter component '{component}'")
    if not name:
        raise precondition_failed("a parameter needs a name")
    validator(name, value)


def _validate_vhost_limits(name: str, value: Any) -> None:
    if name != VHOST_LIMITS_NAME:
        raise precondition_failed(f"vhost limits are one parameter named "
                                  f"'{VHOST_LIMITS_NAME}', not '{name}'")
    if not isinstance(value, Mapping):
        raise precondition_failed("vhost limits must be a JSON object")
    for key, limit in value.items():
        if key not in VHOST_LIMIT_KEYS:
            raise precondition_failed(f"unknown vhost limit '{key}' (known: "
                                      f"{', '.join(VHOST_LIMIT_KEYS)})")
        if type(limit) is not int:
            raise precondition_failed(f"vhost limit '{key}' must be an integer, "
                                      f"not {limit!r}")


register_component(VHOST_LIMITS, _validate_vhost_limits)
register_component(FEDERATION_UPSTREAM, validate_upstream)
register_component(FEDERATION_UPSTREAM_SET, validate_upstream_set)
register_component(SHOVEL, validate_shovel)


def limit_value(limits: Any, key: str) -> int | None:
    """The limit `key` from a vhost's limits parameter; None: no limit (absent or
    negative). 0 allows nothing, as in RabbitMQ."""
    if not isinstance(limits, Mapping):
        return None
    value = limits.get(key)
    if type(value) is not int or value < 0:
        return None
    return value
