"""Replayed records (the replay API's JSON) -> one Arrow record batch of the source schema.

Column by column rather than a tuple per row: Spark takes Arrow batches from a
Python reader as they are, where tuples would be converted row by row in the
worker (bench/spark_bench.py measures the difference). Pure: no I/O.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from connectors.spark.schema import PROPERTIES_ARROW, SOURCE_ARROW

_HEADERS_TYPE = SOURCE_ARROW.field("headers").type
_TIMESTAMP_TYPE = SOURCE_ARROW.field("timestamp").type


def header_text(value: Any) -> str | None:
    """A header value as a string: strings as they are, anything else as its JSON text."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def body_bytes(message: Mapping[str, Any]) -> bytes:
    payload = message.get("payload", "")
    if message.get("payload_encoding") == "base64":
        return binascii.a2b_base64(payload)
    return str(payload).encode("utf-8", "surrogatepass")


def records_batch(queue: str, messages: Sequence[Mapping[str, Any]]) -> pa.RecordBatch:
    offsets: list[int] = []
    timestamps: list[int] = []
    exchanges: list[str] = []
    keys: list[str] = []
    headers: list[list[tuple[str, str | None]] | None] = []
    properties: list[Mapping[str, Any]] = []
    bodies: list[bytes] = []
    for message in messages:
        offsets.append(message["offset"])
        timestamps.append(int(message.get("timestamp") or 0) * 1000)  # ms -> us
        exchanges.append(message.get("exchange", ""))
        keys.append(message.get("routing_key", ""))
        props = message.get("properties") or {}
        table = props.get("headers")
        headers.append(None if table is None else
                       [(str(k), header_text(v)) for k, v in table.items()])
        # pyarrow takes the struct's fields from the dict and ignores the other keys
        # (headers, timestamp, cluster_id), so the broker's dict goes in unchanged.
        properties.append(props)
        bodies.append(body_bytes(message))
    count = len(offsets)
    return pa.RecordBatch.from_arrays([
        pa.array([queue] * count, pa.string()) if count else pa.array([], pa.string()),
        pa.array(offsets, pa.int64()),
        pa.array(timestamps, _TIMESTAMP_TYPE),
        pa.array(exchanges, pa.string()),
        pa.array(keys, pa.string()),
        pa.array(headers, _HEADERS_TYPE),
        pa.array(properties, PROPERTIES_ARROW),
        pa.array(bodies, pa.binary()),
    ], schema=SOURCE_ARROW)


def records_tuples(queue: str, messages: Sequence[Mapping[str, Any]]
                   ) -> list[tuple[Any, ...]]:
    """The same rows as tuples: only for measuring the Arrow path against (the bench)."""
    import datetime
    out = []
    for message in messages:
        props = message.get("properties") or {}
        table = props.get("headers")
        out.append((
            queue, message["offset"],
            datetime.datetime.fromtimestamp(int(message.get("timestamp") or 0) / 1000,
                                            datetime.UTC),
            message.get("exchange", ""), message.get("routing_key", ""),
            None if table is None else {str(k): header_text(v) for k, v in table.items()},
            tuple(props.get(name) for name in PROPERTIES_ARROW.names),
            body_bytes(message)))
    return out
