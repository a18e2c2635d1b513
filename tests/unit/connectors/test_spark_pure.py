"""The connector's pure parts, without Spark: options, offsets, partition planning,
replayed records -> Arrow, sink rows -> messages, the version check."""

from __future__ import annotations

import base64
import itertools
from pathlib import Path

import pyarrow as pa
import pytest

from connectors.spark.broker_http import BrokerHttp
from connectors.spark.offsets import (
    Bounds,
    admit,
    cap,
    data_losses,
    end_offsets,
    rows_for_bytes,
    skip_lost,
    start_offsets,
    with_new_queues,
)
from connectors.spark.option_errors import OptionError
from connectors.spark.outgoing_rows import (
    SinkSchemaError,
    batch_messages,
    check_columns,
    parts,
)
from connectors.spark.partition_planning import plan_slices
from connectors.spark.record_columns import header_text, records_batch
from connectors.spark.schema import SOURCE_ARROW
from connectors.spark.sink_options import (
    parse_sink_options,
    streaming_producer_id,
)
from connectors.spark.source_options import StartSpec, parse_connection, parse_source_options
from connectors.spark.spark_version import UnsupportedSparkVersion, check_version

URL = "http://guest:guest@127.0.0.1:15672"


def source(**options: str) -> dict[str, str]:
    return {"brokers": URL, "queues": "a,b", **options}


# ----------------------------------------------------------------------------- options

def test_source_options_defaults_and_kafka_style_values() -> None:
    parsed = parse_source_options(source(startingOffsets='{"a": 10, "b": -2}',
                                         maxOffsetsPerTrigger="500", failOnDataLoss="false",
                                         vhost="v", brokerRetryMs="100"))
    assert parsed.queues == ("a", "b")
    assert parsed.start == StartSpec("offsets", {"a": 10, "b": -2})
    assert parsed.max_offsets_per_trigger == 500
    assert parsed.fail_on_data_loss is False
    assert (parsed.connection.vhost, parsed.connection.retry_ms) == ("v", 100)
    assert parse_source_options(source()).start.mode == "latest"
    assert parse_source_options(source(), batch=True).start.mode == "earliest"


@pytest.mark.parametrize(("options", "named"), [
    ({"brokers": URL}, "queue"),
    ({"queues": "a"}, "brokers"),
    (source(brokers="ftp://x"), "brokers"),
    (source(queue="a"), "queues"),
    (source(startingOffsets="soonest"), "startingOffsets"),
    (source(startingOffsets='{"c": 1}'), "startingOffsets"),
    (source(startingOffsets='{"a": -3}'), "startingOffsets"),
    (source(startingOffsets="group"), "startingOffsets"),
    (source(maxOffsetsPerTrigger="0"), "maxOffsetsPerTrigger"),
    (source(maxOffsetsPerTrigger="many"), "maxOffsetsPerTrigger"),
    (source(failOnDataLoss="maybe"), "failOnDataLoss"),
    (source(startingTimestamp="1", startingOffsets="earliest"), "startingTimestamp"),
    (source(endingOffsets="latest"), "endingOffsets"),
])
def test_bad_source_options_name_the_option(options: dict[str, str], named: str) -> None:
    with pytest.raises(OptionError, match=f"'{named}'"):
        parse_source_options(options)


def test_sink_producer_id_comes_from_the_checkpoint_or_sink_id(tmp_path: object) -> None:
    one = parse_sink_options({"brokers": URL, "checkpointLocation": "/tmp/cp/"})
    same = parse_sink_options({"brokers": URL, "checkpointLocation": "/tmp/cp"})
    other = parse_sink_options({"brokers": URL, "checkpointLocation": "/tmp/cp2"})
    assert streaming_producer_id(one) == streaming_producer_id(same)
    assert streaming_producer_id(one) != streaming_producer_id(other)
    assert streaming_producer_id(parse_sink_options({"brokers": URL, "sinkId": "s1"})) == "s1"
    with pytest.raises(OptionError, match="'sinkId'"):
        streaming_producer_id(parse_sink_options({"brokers": URL}))
    with pytest.raises(OptionError, match="'batchId'"):
        parse_sink_options({"brokers": URL, "batchId": "3"})
    with pytest.raises(OptionError, match="'messagesPerPart'"):
        parse_sink_options({"brokers": URL, "messagesPerPart": "20000"})


def test_version_check_needs_4_2() -> None:
    check_version("4.2.0")
    check_version("4.3.0.dev1")
    with pytest.raises(UnsupportedSparkVersion, match=r"PySpark >= 4.2.*3.5.1"):
        check_version("3.5.1")


# ----------------------------------------------------------------------------- offsets

BOUNDS = {"a": Bounds(5, 100), "b": Bounds(0, 10)}


def test_start_offsets_for_each_mode() -> None:
    queues = ("a", "b")
    assert start_offsets(StartSpec("earliest"), queues, BOUNDS) == {"a": 5, "b": 0}
    assert start_offsets(StartSpec("latest"), queues, BOUNDS) == {"a": 100, "b": 10}
    assert start_offsets(StartSpec("offsets", {"a": 50, "b": -2}), queues, BOUNDS) == {
        "a": 50, "b": 0}
    assert start_offsets(StartSpec("offsets", {"a": -1}), queues, BOUNDS) == {"a": 100, "b": 10}
    # A group that does not know queue b: b starts at its earliest.
    assert start_offsets(StartSpec("group"), queues, BOUNDS, {"a": 70}) == {"a": 70, "b": 0}
    assert end_offsets(StartSpec("offsets", {"a": 500}), queues, BOUNDS) == {"a": 100, "b": 10}


def test_admission_control_shares_the_limit_and_never_exceeds_it() -> None:
    start = {"a": 0, "b": 0, "c": 0}
    latest = {"a": 900, "b": 100, "c": 1}
    end = admit(start, latest, 100)
    assert sum(end.values()) == 100
    assert end["c"] == 1 and end["a"] > end["b"] > 0
    assert admit(start, latest, None) == latest
    assert admit({"a": 10}, {"a": 5}, 3) == {"a": 10}  # never behind the start
    for limit in (1, 2, 3, 7):
        got = admit(start, latest, limit)
        assert sum(got.values()) == limit and all(got[q] <= latest[q] for q in got)


def test_data_loss_available_now_and_new_queues() -> None:
    losses = data_losses({"a": 2, "b": 3}, BOUNDS)
    assert [(x.queue, x.wanted, x.first_kept) for x in losses] == [("a", 2, 5)]
    assert "queue 'a': offset 2 " in losses[0].message() and "is 5" in losses[0].message()
    assert skip_lost({"a": 2, "b": 3}, BOUNDS) == {"a": 5, "b": 3}
    assert cap({"a": 100, "b": 10}, {"a": 60}) == {"a": 60, "b": 10}
    assert with_new_queues({"a": 50}, ("a", "b"), BOUNDS) == {"a": 50, "b": 0}
    assert rows_for_bytes(10_000, 1000.0) == 10 and rows_for_bytes(1, 1000.0) == 1


def test_partition_planning_covers_each_range_in_order() -> None:
    slices = plan_slices({"a": 0, "b": 10, "c": 4}, {"a": 250, "b": 12, "c": 4}, 100, 4)
    assert all(s.rows > 0 for s in slices)
    for queue, begin, end in (("a", 0, 250), ("b", 10, 12)):
        mine = [s for s in slices if s.queue == queue]
        assert mine[0].start == begin and mine[-1].end == end
        assert all(x.end == y.start for x, y in itertools.pairwise(mine))
    assert all(s.rows <= 100 for s in slices)
    assert len(plan_slices({"a": 0}, {"a": 10}, 1000, 4)) == 4  # every core gets work
    assert plan_slices({"a": 3}, {"a": 3}, 10) == []


# ----------------------------------------------------------------------------- rows

def test_replayed_records_become_one_arrow_batch_of_the_source_schema() -> None:
    messages = [{
        "offset": 7, "timestamp": 1_700_000_000_123, "exchange": "x", "routing_key": "k",
        "properties": {"content_type": "text/plain", "priority": 3, "timestamp": 5,
                       "headers": {"s": "v", "n": 1, "t": {"a": [1, 2]}, "none": None}},
        "payload": base64.b64encode(b"\xff\x00").decode(), "payload_encoding": "base64"},
        {"offset": 8, "timestamp": 0, "exchange": "", "routing_key": "", "properties": {},
         "payload": "text", "payload_encoding": "string"}]
    batch = records_batch("q", messages)
    assert batch.schema.equals(SOURCE_ARROW)
    rows = batch.to_pylist()
    assert rows[0]["queue"] == "q" and rows[0]["offset"] == 7 and rows[0]["body"] == b"\xff\x00"
    assert dict(rows[0]["headers"]) == {"s": "v", "n": "1", "t": '{"a":[1,2]}', "none": None}
    assert rows[0]["properties"]["content_type"] == "text/plain"
    assert rows[0]["properties"]["priority"] == 3
    assert rows[1]["headers"] is None and rows[1]["body"] == b"text"
    assert records_batch("q", []).num_rows == 0
    assert header_text(True) == "true"


def test_source_arrow_schema_is_what_spark_expects() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    from connectors.spark.schema import INT_PROPERTIES, PROPERTY_FIELDS
    props = StructType([StructField(n, IntegerType() if n in INT_PROPERTIES else StringType())
                        for n in PROPERTY_FIELDS])
    schema = StructType([
        StructField("queue", StringType()), StructField("offset", LongType()),
        StructField("timestamp", TimestampType()), StructField("exchange", StringType()),
        StructField("routing_key", StringType()),
        StructField("headers", MapType(StringType(), StringType())),
        StructField("properties", props), StructField("body", BinaryType())])
    assert to_arrow_schema(schema, timezone="UTC").equals(SOURCE_ARROW)


def test_sink_rows_become_messages() -> None:
    batch = pa.RecordBatch.from_pylist([
        {"body": b"\x00\x01", "routing_key": "q", "headers": [("h", "v")],
         "properties": {"content_type": "a/b", "priority": None}},
        {"body": b"plain", "routing_key": None, "headers": None, "properties": None},
    ], schema=pa.schema([
        ("body", pa.binary()), ("routing_key", pa.string()),
        ("headers", pa.map_(pa.string(), pa.string())),
        ("properties", pa.struct([("content_type", pa.string()), ("priority", pa.int32())]))]))
    first, second = batch_messages(batch, "default-key")
    assert first == {"routing_key": "q", "payload": "AAE=", "payload_encoding": "base64",
                     "properties": {"content_type": "a/b", "headers": {"h": "v"}}}
    assert second["routing_key"] == "default-key" and second["properties"] == {}
    assert base64.b64decode(second["payload"]) == b"plain"
    text = pa.RecordBatch.from_pylist([{"body": "héllo"}])
    assert batch_messages(text)[0]["payload_encoding"] == "string"
    with pytest.raises(SinkSchemaError, match="null body"):
        batch_messages(pa.RecordBatch.from_pylist([{"body": None}],
                                                  schema=pa.schema([("body", pa.binary())])))


def test_sink_schema_check_and_parts() -> None:
    kinds = check_columns([("body", "binary"), ("routing_key", "string"),
                           ("headers", "map<string,string>"),
                           ("properties", "struct<content_type:string,priority:int>")])
    assert kinds.routing_key and kinds.headers and kinds.properties and not kinds.body_is_text
    for columns, problem in (([("value", "binary")], "'body'"),
                             ([("body", "int")], "binary or string"),
                             ([("body", "string"), ("routing_key", "int")], "routing_key"),
                             ([("body", "string"), ("properties", "struct<colour:string>")],
                              "colour")):
        with pytest.raises(SinkSchemaError, match=problem):
            check_columns(columns)
    messages = ({"routing_key": "", "payload": "x" * 10} for _ in range(25))
    assert [len(p) for p in parts(messages, 10, 1 << 20)] == [10, 10, 5]
    big = ({"routing_key": "", "payload": "x" * 100} for _ in range(5))
    assert [len(p) for p in parts(big, 100, 300)] == [2, 2, 1]


def test_tls_options_for_https_brokers(tmp_path: Path) -> None:
    connection = parse_connection({"brokers": "https://u:p@127.0.0.1:15671",
                                   "caFile": "/etc/ca.pem", "certFile": "c.pem",
                                   "keyFile": "k.pem"})
    assert (connection.ca_file, connection.cert_file, connection.key_file) == (
        "/etc/ca.pem", "c.pem", "k.pem")
    with pytest.raises(OptionError, match="keyFile"):
        parse_connection({"brokers": "https://127.0.0.1", "keyFile": "k.pem"})
    missing = parse_connection({"brokers": "https://127.0.0.1",
                                "caFile": str(tmp_path / "absent.pem")})
    with pytest.raises(OptionError, match=r"absent\.pem|No such file"):
        BrokerHttp(missing)
