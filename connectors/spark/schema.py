"""The source's schema, as Spark sees it and as the Arrow batches `read` yields carry it.

`headers` is a map of strings: AMQP header values that are not strings (numbers,
booleans, tables, arrays) are rendered as their JSON text, e.g. `42`, `true`,
`{"a": 1}`; a null header value stays null.
"""

from __future__ import annotations

import pyarrow as pa

PROPERTY_FIELDS: tuple[str, ...] = (
    "content_type", "content_encoding", "correlation_id", "reply_to", "message_id", "type",
    "app_id", "user_id", "priority", "delivery_mode", "expiration")
INT_PROPERTIES = frozenset({"priority", "delivery_mode"})

PROPERTIES_DDL = ", ".join(
    f"{name} {'int' if name in INT_PROPERTIES else 'string'}" for name in PROPERTY_FIELDS)
SOURCE_DDL = (
    "queue string, offset long, timestamp timestamp, exchange string, routing_key string, "
    f"headers map<string,string>, properties struct<{PROPERTIES_DDL}>, body binary")

PROPERTIES_ARROW = pa.struct([
    pa.field(name, pa.int32() if name in INT_PROPERTIES else pa.string())
    for name in PROPERTY_FIELDS])
# What pyspark's to_arrow_schema(schema, timezone="UTC") makes of SOURCE_DDL: Spark checks
# a reader's batches against exactly that (tests/unit/connectors compares the two).
SOURCE_ARROW = pa.schema([
    pa.field("queue", pa.string()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("exchange", pa.string()),
    pa.field("routing_key", pa.string()),
    pa.field("headers", pa.map_(pa.field("key", pa.string(), nullable=False),
                                pa.field("value", pa.string()))),
    pa.field("properties", PROPERTIES_ARROW),
    pa.field("body", pa.binary()),
])
