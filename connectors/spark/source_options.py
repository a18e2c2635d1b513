"""The source's options (Spark Kafka source style), parsed and checked without Spark.

Option names are matched case-insensitively (Spark passes them so). Every bad
value raises OptionError naming the option.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from api.client.errors import InvalidUrl
from api.client.urls import parse_urls
from connectors.spark.option_errors import OptionError

EARLIEST = -2  # Kafka's markers in a startingOffsets / endingOffsets JSON
LATEST = -1
DEFAULT_RETRY_MS = 30_000
DEFAULT_ROWS_PER_PARTITION = 100_000


@dataclass(frozen=True)
class Connection:
    """How an executor reaches the broker: picklable, carried by every input partition."""

    brokers: str
    vhost: str = "/"
    retry_ms: int = DEFAULT_RETRY_MS
    # For https:// brokers: paths readable on the driver and on every executor.
    ca_file: str = ""  # the CA their certificates chain to ("": the system's CAs)
    cert_file: str = ""  # a client certificate, for brokers that ask for one
    key_file: str = ""


@dataclass(frozen=True)
class StartSpec:
    """Where a new query starts: a mode, or per-queue offsets (-2 earliest, -1 latest)."""

    mode: str  # "earliest" | "latest" | "offsets" | "timestamp" | "group"
    offsets: dict[str, int] = field(default_factory=dict)
    timestamp_ms: int | None = None


@dataclass(frozen=True)
class SourceOptions:
    connection: Connection
    queues: tuple[str, ...]
    start: StartSpec
    ending: StartSpec | None  # batch reads only; mode "latest" or "offsets"
    max_offsets_per_trigger: int | None
    max_bytes_per_trigger: int | None
    fail_on_data_loss: bool
    consumer_group: str | None
    rows_per_partition: int
    min_partitions: int


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in options.items()}


def parse_int(options: Mapping[str, str], name: str, default: int | None, minimum: int
              ) -> int | None:
    text = options.get(name.lower())
    if text is None or text.strip() == "":
        return default
    try:
        value = int(text.strip())
    except ValueError:
        raise OptionError(name, f"expected an integer, got {text!r}") from None
    if value < minimum:
        raise OptionError(name, f"must be at least {minimum}, got {value}")
    return value


def parse_bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise OptionError(name, f"expected true or false, got {text!r}")
    return value == "true"


def parse_connection(options: Mapping[str, str]) -> Connection:
    lowered = _lower(options)
    brokers = lowered.get("brokers", "").strip()
    if not brokers:
        raise OptionError("brokers", "required: one or more node URLs, comma-separated "
                          "(http://user:pass@host:port)")
    try:  # checked on the driver, so that a typo fails the query before any task runs
        parse_urls(brokers)
    except InvalidUrl as error:
        raise OptionError("brokers", str(error)) from None
    vhost = lowered.get("vhost", "/")
    if not vhost:
        raise OptionError("vhost", "must not be empty")
    retry_ms = parse_int(lowered, "brokerRetryMs", DEFAULT_RETRY_MS, 0)
    assert retry_ms is not None
    connection = Connection(brokers, vhost, retry_ms, lowered.get("cafile", ""),
                            lowered.get("certfile", ""), lowered.get("keyfile", ""))
    if connection.key_file and not connection.cert_file:
        raise OptionError("keyFile", "a client key needs its certificate (certFile)")
    return connection


def parse_queues(options: Mapping[str, str]) -> tuple[str, ...]:
    lowered = _lower(options)
    single, many = lowered.get("queue"), lowered.get("queues")
    if single is not None and many is not None:
        raise OptionError("queues", "give 'queue' or 'queues', not both")
    if single is not None:
        if not single.strip():
            raise OptionError("queue", "must not be empty")
        return (single.strip(),)
    if many is None:
        raise OptionError("queue", "required: 'queue' (one name) or 'queues' (a comma list)")
    names = tuple(name.strip() for name in many.split(",") if name.strip())
    if not names:
        raise OptionError("queues", "must name at least one queue")
    if len(set(names)) != len(names):
        raise OptionError("queues", f"names a queue twice: {many!r}")
    return names


def parse_offsets_json(name: str, text: str, queues: tuple[str, ...], allow_earliest: bool
                       ) -> dict[str, int]:
    try:
        data = json.loads(text)
    except ValueError:
        raise OptionError(name, f"expected 'earliest', 'latest' or a JSON object such as "
                          f'{{"q1": 10, "q2": -2}}, got {text!r}') from None
    if not isinstance(data, dict):
        raise OptionError(name, f"the JSON must be an object of queue -> offset, got {text!r}")
    out: dict[str, int] = {}
    lowest = EARLIEST if allow_earliest else LATEST
    for queue, value in data.items():
        if queue not in queues:
            raise OptionError(name, f"names queue {queue!r}, which is not read "
                              f"(queues: {', '.join(queues)})")
        if not isinstance(value, int) or isinstance(value, bool) or value < lowest:
            raise OptionError(name, f"the offset of {queue!r} must be an integer >= {lowest} "
                              f"(-2 earliest, -1 latest), got {value!r}")
        out[queue] = value
    return out


def parse_start(options: Mapping[str, str], queues: tuple[str, ...]) -> StartSpec:
    lowered = _lower(options)
    offsets_text = lowered.get("startingoffsets")
    timestamp = parse_int(lowered, "startingTimestamp", None, 0)
    if timestamp is not None:
        if offsets_text is not None:
            raise OptionError("startingTimestamp",
                              "give startingOffsets or startingTimestamp, not both")
        return StartSpec("timestamp", timestamp_ms=timestamp)
    text = (offsets_text or "latest").strip()
    if text.lower() in ("earliest", "latest", "group"):
        mode = text.lower()
        if mode == "group" and not lowered.get("consumergroup"):
            raise OptionError("startingOffsets", "'group' needs the option consumerGroup")
        return StartSpec(mode)
    return StartSpec("offsets", parse_offsets_json("startingOffsets", text, queues, True))


def parse_ending(options: Mapping[str, str], queues: tuple[str, ...]) -> StartSpec:
    text = _lower(options).get("endingoffsets", "latest").strip()
    if text.lower() == "latest":
        return StartSpec("latest")
    if text.lower() == "earliest":
        raise OptionError("endingOffsets", "must be 'latest' or a JSON object, not 'earliest'")
    offsets = parse_offsets_json("endingOffsets", text, queues, False)
    return StartSpec("offsets", offsets)


def parse_source_options(options: Mapping[str, str], *, batch: bool = False) -> SourceOptions:
    """Every source option checked; `batch`: a `spark.read` (endingOffsets allowed)."""
    lowered = _lower(options)
    queues = parse_queues(lowered)
    start = parse_start(lowered, queues)
    if batch:
        if start.mode == "latest" and "startingoffsets" not in lowered:
            start = StartSpec("earliest")  # as Kafka's batch source: earliest by default
        elif start.mode == "latest":
            raise OptionError("startingOffsets", "a batch read cannot start at 'latest'")
        for stream_only in ("maxOffsetsPerTrigger", "maxBytesPerTrigger"):
            if stream_only.lower() in lowered:
                raise OptionError(stream_only, "applies to streaming reads only")
    elif "endingoffsets" in lowered:
        raise OptionError("endingOffsets", "applies to batch reads (spark.read) only")
    group = lowered.get("consumergroup")
    if group is not None and not group.strip():
        raise OptionError("consumerGroup", "must not be empty")
    rows = parse_int(lowered, "rowsPerPartition", DEFAULT_ROWS_PER_PARTITION, 1)
    minimum = parse_int(lowered, "minPartitions", 1, 1)
    assert rows is not None and minimum is not None
    return SourceOptions(
        connection=parse_connection(lowered), queues=queues, start=start,
        ending=parse_ending(lowered, queues) if batch else None,
        max_offsets_per_trigger=parse_int(lowered, "maxOffsetsPerTrigger", None, 1),
        max_bytes_per_trigger=parse_int(lowered, "maxBytesPerTrigger", None, 1),
        fail_on_data_loss=parse_bool(lowered, "failOnDataLoss", True),
        consumer_group=group.strip() if group else None,
        rows_per_partition=rows, min_partitions=minimum)
