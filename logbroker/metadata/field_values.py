"""AMQP field values as Python holds them: their AMQP type, strict equality, display.

A client library turns an AMQP table into Python values (pika: `str` for
longstr, `int`, `bool`, `float`, `Decimal`, `datetime`, `bytes`, `dict`,
`list`, `None`). RabbitMQ compares arguments by type *class* and value
(`rabbit_misc:type_class/1`: every integer width and decimal are one class,
float and double another), so `True` never equals `1` and `1` never equals
`1.0` here, although Python says they are equal.

`erl_format` renders a value the way RabbitMQ's `~tp` would in an error text:
strings bare (`~ts` for binaries), numbers and booleans as written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

_INT32 = range(-(2**31), 2**31)


def amqp_type_name(value: Any) -> str:
    """The RabbitMQ name of the field type a client would encode `value` as."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "signedint" if value in _INT32 else "long"
    if isinstance(value, float):
        return "double"
    if isinstance(value, Decimal):
        return "decimal"
    if isinstance(value, str):
        return "longstr"
    if isinstance(value, bytes | bytearray):
        return "binary"
    if isinstance(value, datetime):
        return "timestamp"
    if isinstance(value, Mapping):
        return "table"
    if isinstance(value, list | tuple):
        return "array"
    if value is None:
        return "void"
    return type(value).__name__


def type_class(value: Any) -> str:
    """`rabbit_misc:type_class/1` applied to `value`'s AMQP type."""
    name = amqp_type_name(value)
    if name in ("signedint", "long", "decimal"):
        return "int"
    if name == "double":
        return "float"
    return name


def is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def amqp_equal(left: Any, right: Any) -> bool:
    """Equal as AMQP field values: same type class and equal value, recursively."""
    if type_class(left) != type_class(right):
        return False
    if isinstance(left, Mapping):
        return left.keys() == right.keys() and all(
            amqp_equal(left[key], right[key]) for key in left
        )
    if isinstance(left, list | tuple):
        return len(left) == len(right) and all(map(amqp_equal, left, right))
    if isinstance(left, float) and math.isnan(left):
        return math.isnan(right)
    return bool(left == right)


def erl_format(value: Any) -> str:
    """`value` as RabbitMQ's error texts show it (`~ts` / `~tp`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if value is None:
        return "undefined"
    if isinstance(value, Mapping):
        inner = ",".join(f"{{<<\"{key}\">>,{erl_term(item)}}}" for key, item in value.items())
        return f"[{inner}]"
    if isinstance(value, list | tuple):
        return "[" + ",".join(erl_term(item) for item in value) + "]"
    return str(value)


def erl_term(value: Any) -> str:
    """`value` as an Erlang term inside a larger term (binaries as `<<"...">>`)."""
    if isinstance(value, str):
        return f'<<"{value}">>'
    if value is None:
        return "null"
    return erl_format(value)
