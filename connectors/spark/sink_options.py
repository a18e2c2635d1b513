"""The sink's options and its producer identity, parsed and checked without Spark.

The producer id is what makes a re-run idempotent: the broker publishes a
(producer, seq) once. For a streaming query it must survive restarts of the
same query, so it is derived from the query's `checkpointLocation` (a hash of
its absolute path), or given as `sinkId` (which wins when both are given).
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from connectors.spark.option_errors import OptionError
from connectors.spark.source_options import Connection, _lower, parse_connection, parse_int

DEFAULT_MESSAGES_PER_PART = 5_000
DEFAULT_BYTES_PER_PART = 8 << 20
_SINK_ID = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


@dataclass(frozen=True)
class SinkOptions:
    connection: Connection
    exchange: str
    routing_key: str
    sink_id: str | None
    checkpoint_location: str | None
    batch_id: int | None
    messages_per_part: int
    bytes_per_part: int


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    lowered = _lower(options)
    sink_id = lowered.get("sinkid")
    if sink_id is not None and not _SINK_ID.match(sink_id):
        raise OptionError("sinkId", "1 to 200 characters of letters, digits, '.', '_' or '-', "
                          f"got {sink_id!r}")
    batch_id = parse_int(lowered, "batchId", None, 0)
    if batch_id is not None and sink_id is None:
        raise OptionError("batchId", "needs the option sinkId (the producer the batch id "
                          "belongs to)")
    per_part = parse_int(lowered, "messagesPerPart", DEFAULT_MESSAGES_PER_PART, 1)
    if per_part is not None and per_part > 10_000:
        raise OptionError("messagesPerPart", f"at most 10000 (the broker's limit), got {per_part}")
    bytes_per_part = parse_int(lowered, "bytesPerPart", DEFAULT_BYTES_PER_PART, 1)
    assert per_part is not None and bytes_per_part is not None
    return SinkOptions(
        connection=parse_connection(lowered), exchange=lowered.get("exchange", ""),
        routing_key=lowered.get("routingkey", ""), sink_id=sink_id,
        checkpoint_location=lowered.get("checkpointlocation") or None, batch_id=batch_id,
        messages_per_part=per_part, bytes_per_part=bytes_per_part)


def checkpoint_key(location: str) -> str:
    """The checkpoint location as one absolute string: a URI stays as it is, a local path is
    made absolute (a relative path means the same directory for a restart in the same cwd)."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", location) and not re.match(r"^[A-Za-z]:[\\/]",
                                                                          location):
        return location.rstrip("/")
    return os.path.abspath(location).rstrip("/")


def streaming_producer_id(options: SinkOptions) -> str:
    if options.sink_id is not None:
        return options.sink_id
    if options.checkpoint_location is None:
        raise OptionError("sinkId", "a streaming write needs option checkpointLocation (the "
                          "producer id is derived from it) or sinkId")
    digest = hashlib.sha256(checkpoint_key(options.checkpoint_location).encode()).hexdigest()
    return f"spark-{digest[:32]}"


def batch_producer_id(options: SinkOptions) -> str:
    """A `df.write`: `sinkId` when given, else a fresh producer (the write is not idempotent
    across re-runs then)."""
    return options.sink_id if options.sink_id is not None else f"spark-batch-{uuid.uuid4().hex}"
