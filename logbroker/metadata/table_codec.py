"""Argument tables to JSON and back, exactly.

AMQP tables hold more than JSON can say. JSON covers None, bool, int, finite
float, str, lists and tables; everything else becomes a tagged object
`{"$t": TAG, "v": ...}`:

| Python value        | JSON                                         |
| ------------------- | -------------------------------------------- |
| `bytes`             | `{"$t": "bytes", "v": "<base64>"}`           |
| `Decimal`           | `{"$t": "decimal", "v": "1.50"}` (str keeps the exponent) |
| `datetime`          | `{"$t": "datetime", "v": "<isoformat>"}` (naive stays naive) |
| non-finite `float`  | `{"$t": "float", "v": "nan" / "inf" / "-inf"}` |
| table with a `$t` key | `{"$t": "table", "v": {...}}`              |

A plain JSON object is a table; an object with a `$t` key is a tag, which is
why a table that itself has a `$t` key is wrapped. Tuples come back as lists.
bool stays bool: JSON has `true`, and decoding checks for bool before int.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

TAG = "$t"


class TableDecodeError(ValueError):
    """The JSON is not an encoded field value."""


def encode_value(value: Any) -> Any:
    """A JSON-safe stand-in for the AMQP field value `value`."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {TAG: "float", "v": repr(value)}
    if isinstance(value, bytes | bytearray):
        return {TAG: "bytes", "v": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Decimal):
        return {TAG: "decimal", "v": str(value)}
    if isinstance(value, datetime):
        return {TAG: "datetime", "v": value.isoformat()}
    if isinstance(value, Mapping):
        return encode_table(value)
    if isinstance(value, list | tuple):
        return [encode_value(item) for item in value]
    raise TypeError(f"not an AMQP field value: {type(value).__name__}")


def encode_table(table: Mapping[str, Any]) -> dict[str, Any]:
    encoded: dict[str, Any] = {}
    for key, item in table.items():
        if not isinstance(key, str):
            raise TypeError(f"table keys must be str, not {type(key).__name__}")
        encoded[key] = encode_value(item)
    return {TAG: "table", "v": encoded} if TAG in encoded else encoded


def decode_value(data: Any) -> Any:
    """The field value `encode_value` turned into `data`."""
    if data is None or isinstance(data, bool | int | float | str):
        return data
    if isinstance(data, list):
        return [decode_value(item) for item in data]
    if isinstance(data, dict):
        return _decode_tagged(data) if TAG in data else _decode_plain_table(data)
    raise TableDecodeError(f"unexpected JSON value of type {type(data).__name__}")


def decode_table(data: Any) -> dict[str, Any]:
    value = decode_value(data)
    if not isinstance(value, dict):
        raise TableDecodeError("expected a table")
    return value


def _decode_plain_table(data: dict[str, Any]) -> dict[str, Any]:
    return {key: decode_value(item) for key, item in data.items()}


def _decode_tagged(data: dict[str, Any]) -> Any:
    tag = data[TAG]
    raw = data.get("v")
    if set(data) != {TAG, "v"}:
        raise TableDecodeError(f"malformed tagged value: {sorted(data)}")
    try:
        if tag == "table" and isinstance(raw, dict):
            return _decode_plain_table(raw)
        if not isinstance(raw, str):
            raise TableDecodeError(f"tag {tag!r} needs a string value")
        return _decode_scalar(tag, raw)
    except (binascii.Error, InvalidOperation, ValueError) as error:
        raise TableDecodeError(f"bad {tag!r} value {raw!r}: {error}") from error


def _decode_scalar(tag: Any, raw: str) -> Any:
    if tag == "bytes":
        return base64.b64decode(raw, validate=True)
    if tag == "decimal":
        return Decimal(raw)
    if tag == "datetime":
        return datetime.fromisoformat(raw)
    if tag == "float" and raw in ("nan", "inf", "-inf"):
        return float(raw)
    raise TableDecodeError(f"unknown tag {tag!r}")
