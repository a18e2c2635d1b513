"""Sink rows -> the broker's batch-publish messages, pure.

A sink row has `body` (binary or string) and optionally `routing_key` (string),
`headers` (a map) and `properties` (a struct with the source's property
fields); other columns are ignored. Rows come as Arrow record batches.
"""

from __future__ import annotations

import binascii
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from connectors.spark.schema import PROPERTY_FIELDS

SINK_COLUMNS = ("body", "routing_key", "headers", "properties")
MAX_PART_MESSAGES = 10_000  # the broker's limit per staged part


class SinkSchemaError(ValueError):
    pass


@dataclass(frozen=True)
class ColumnKinds:
    """What the sink found in the schema: which optional columns are there."""

    body_is_text: bool
    routing_key: bool
    headers: bool
    properties: bool


def check_columns(columns: Sequence[tuple[str, str]]) -> ColumnKinds:
    """(name, Spark simpleString type) pairs -> ColumnKinds, or SinkSchemaError saying what
    is wrong (checked on the driver, before any task)."""
    kinds = {name.lower(): kind.lower() for name, kind in columns}
    body = kinds.get("body")
    if body not in ("binary", "string"):
        raise SinkSchemaError(
            "the logbroker sink needs a 'body' column of type binary or string"
            + ("" if body is None else f", not {body}"))
    key = kinds.get("routing_key")
    if key is not None and key != "string":
        raise SinkSchemaError(f"column 'routing_key' must be a string, not {key}")
    headers = kinds.get("headers")
    if headers is not None and not headers.startswith("map<string,"):
        raise SinkSchemaError(f"column 'headers' must be a map with string keys, not {headers}")
    props = kinds.get("properties")
    if props is not None:
        if not props.startswith("struct<"):
            raise SinkSchemaError(f"column 'properties' must be a struct, not {props}")
        names = [field.split(":", 1)[0] for field in _struct_fields(props)]
        unknown = [name for name in names if name not in PROPERTY_FIELDS]
        if unknown:
            raise SinkSchemaError(
                f"column 'properties' has unknown fields {unknown}; allowed: "
                f"{', '.join(PROPERTY_FIELDS)}")
    return ColumnKinds(body == "string", key is not None, headers is not None,
                       props is not None)


def _struct_fields(simple: str) -> list[str]:
    """Top-level fields of a simpleString struct<a:int,b:map<string,int>>."""
    inner = simple[len("struct<"):-1]
    fields, depth, current = [], 0, ""
    for char in inner:
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        if char == "," and depth == 0:
            fields.append(current)
            current = ""
        else:
            current += char
    if current:
        fields.append(current)
    return fields


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index).to_pylist()


def batch_messages(batch: pa.RecordBatch, default_routing_key: str = ""
                   ) -> list[dict[str, Any]]:
    """One message per row, in row order. A null body is an error (no message is empty by
    accident); a null routing key takes `default_routing_key`."""
    bodies = _column(batch, "body")
    if bodies is None:
        raise SinkSchemaError("the logbroker sink needs a 'body' column")
    keys = _column(batch, "routing_key")
    headers = _column(batch, "headers")
    props = _column(batch, "properties")
    out: list[dict[str, Any]] = []
    for row, body in enumerate(bodies):
        if body is None:
            raise SinkSchemaError(f"row {row} of a batch has a null body")
        if isinstance(body, str):
            payload, encoding = body, "string"
        else:
            payload, encoding = binascii.b2a_base64(body, newline=False).decode("ascii"), \
                "base64"
        properties: dict[str, Any] = {}
        if props is not None and props[row] is not None:
            properties = {k: v for k, v in props[row].items() if v is not None}
        if headers is not None and headers[row] is not None:
            properties["headers"] = dict(headers[row])
        key = keys[row] if keys is not None and keys[row] is not None else default_routing_key
        out.append({"routing_key": key, "payload": payload, "payload_encoding": encoding,
                    "properties": properties})
    return out


def parts(messages: Iterator[dict[str, Any]], max_messages: int, max_bytes: int
          ) -> Iterator[list[dict[str, Any]]]:
    """Consecutive groups of at most `max_messages` messages and about `max_bytes` of
    payload: one staged part each (bounded request size and task memory)."""
    limit = max(1, min(max_messages, MAX_PART_MESSAGES))
    current: list[dict[str, Any]] = []
    size = 0
    for message in messages:
        current.append(message)
        size += len(message["payload"]) + len(message["routing_key"]) + 64
        if len(current) >= limit or size >= max_bytes:
            yield current
            current, size = [], 0
    if current:
        yield current
