"""The streaming and batch source against a real broker process, on local[2] Spark."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import BrokerProcess
from tests.integration.spark.spark_helpers import (
    BatchCollector,
    declare,
    publish,
    queue_view,
    wait_until,
)


@pytest.fixture
def http(broker: BrokerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=broker.url, auth=("guest", "guest"), timeout=30.0) as client:
        yield client


def stream(spark: Any, broker: BrokerProcess, **options: str) -> Any:
    reader = spark.readStream.format("logbroker").option("brokers", broker.url)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def run_available_now(frame: Any, collector: BatchCollector, checkpoint: Path) -> None:
    query = (frame.writeStream.foreachBatch(collector).trigger(availableNow=True)
             .option("checkpointLocation", str(checkpoint)).start())
    assert query.awaitTermination(120), "the AvailableNow query did not finish"
    assert query.exception() is None


def test_reads_while_publishing_and_resumes_from_checkpoint_exactly_once(
        spark: Any, broker: BrokerProcess, http: httpx.Client, tmp_path: Path) -> None:
    per_queue = 5000
    queues = ("live-a", "live-b")
    for queue in queues:
        declare(http, queue)

    first_stopped = threading.Event()

    def produce() -> None:
        with httpx.Client(base_url=broker.url, auth=("guest", "guest"), timeout=30) as client:
            for start in range(0, per_queue, 100):
                if start == per_queue // 2:
                    # Half is out: the rest waits for the first query to stop (bounded), so
                    # messages still arrive across the stop however slowly Spark starts.
                    first_stopped.wait(120)
                for queue in queues:
                    publish(client, queue, [f"{queue}-{i}" for i in range(start, start + 100)])
                time.sleep(0.15)

    producer = threading.Thread(target=produce)
    producer.start()
    collector = BatchCollector()
    checkpoint = tmp_path / "checkpoint"

    def start() -> Any:
        frame = stream(spark, broker, queues=",".join(queues), startingOffsets="earliest",
                       maxOffsetsPerTrigger="1500")
        return (frame.writeStream.foreachBatch(collector)
                .option("checkpointLocation", str(checkpoint)).start())

    first = start()
    wait_until(lambda: collector.count() >= 1000, "the first rows", 120)
    first.stop()
    stopped_at = collector.count()
    producer_running_at_stop = producer.is_alive()
    first_stopped.set()
    second = start()
    producer.join(120)
    wait_until(lambda: collector.count() >= 2 * per_queue, "every row", 120)
    second.processAllAvailable()
    second.stop()

    assert producer_running_at_stop, "the query should stop while messages still arrive"
    assert stopped_at < 2 * per_queue
    assert collector.rerun_mismatches == []
    rows = collector.rows()
    for queue in queues:
        mine = [(offset, body) for q, offset, body in rows if q == queue]
        assert [offset for offset, _ in mine] == list(range(per_queue)), queue
        assert [bytes(body).decode() for _, body in mine] == [
            f"{queue}-{i}" for i in range(per_queue)]
    assert max(len(batch) for batch in collector.batches.values()) <= 1500


def test_starting_offsets_and_max_offsets_per_trigger(
        spark: Any, broker: BrokerProcess, http: httpx.Client, tmp_path: Path) -> None:
    declare(http, "start-q")
    publish(http, "start-q", [f"old-{i}" for i in range(300)])
    time.sleep(0.05)
    middle_ms = int(time.time() * 1000)
    time.sleep(0.05)
    publish(http, "start-q", [f"new-{i}" for i in range(100)])

    earliest = BatchCollector()
    run_available_now(stream(spark, broker, queue="start-q", startingOffsets="earliest",
                             maxOffsetsPerTrigger="120"), earliest, tmp_path / "earliest")
    assert [offset for _, offset, _ in earliest.rows()] == list(range(400))
    # Admission control: AvailableNow honours the limit, every batch at most 120 rows.
    assert [len(batch) for _, batch in sorted(earliest.batches.items())] == [120, 120, 120, 40]

    by_json = BatchCollector()
    run_available_now(stream(spark, broker, queue="start-q",
                             startingOffsets='{"start-q": 390}'), by_json, tmp_path / "json")
    assert [offset for _, offset, _ in by_json.rows()] == list(range(390, 400))

    by_time = BatchCollector()
    run_available_now(stream(spark, broker, queue="start-q",
                             startingTimestamp=str(middle_ms)), by_time, tmp_path / "time")
    assert [bytes(body).decode() for *_, body in by_time.rows()] == [
        f"new-{i}" for i in range(100)]

    latest = BatchCollector()
    query = (stream(spark, broker, queue="start-q", startingOffsets="latest")
             .writeStream.foreachBatch(latest)
             .option("checkpointLocation", str(tmp_path / "latest")).start())
    try:
        query.processAllAvailable()  # the first batch fixes the start at the log end
        publish(http, "start-q", ["after-0", "after-1"])
        wait_until(lambda: latest.count() >= 2, "the rows published after the start", 60)
        query.processAllAvailable()
    finally:
        query.stop()
    assert [(offset, bytes(body)) for _, offset, body in latest.rows()] == [
        (400, b"after-0"), (401, b"after-1")]


def test_batch_read_of_a_fixed_range_with_headers_and_properties(
        spark: Any, broker: BrokerProcess, http: httpx.Client) -> None:
    declare(http, "batch-q")
    publish(http, "batch-q", [f"b-{i}" for i in range(100)], properties={
        "content_type": "text/plain", "priority": 4, "delivery_mode": 2, "message_id": "m",
        "headers": {"text": "x", "number": 7, "flag": True, "table": {"a": 1}}})
    frame = (spark.read.format("logbroker").option("brokers", broker.url)
             .option("queue", "batch-q").option("startingOffsets", '{"batch-q": 10}')
             .option("endingOffsets", '{"batch-q": 60}').load())
    rows = frame.orderBy("offset").collect()
    assert [row["offset"] for row in rows] == list(range(10, 60))
    first = rows[0]
    assert first["queue"] == "batch-q" and first["routing_key"] == "batch-q"
    assert bytes(first["body"]) == b"b-10"
    assert first["headers"] == {"text": "x", "number": "7", "flag": "true",
                                "table": '{"a":1}'}
    props = first["properties"]
    assert (props["content_type"], props["priority"], props["delivery_mode"],
            props["message_id"], props["reply_to"]) == ("text/plain", 4, 2, "m", None)
    assert first["timestamp"] is not None
    everything = (spark.read.format("logbroker").option("brokers", broker.url)
                  .option("queue", "batch-q").load())
    assert everything.count() == 100


def drop_head_by_retention(http: httpx.Client, queue: str) -> int:
    """Fill more than one 64 MiB log segment, settle it all: retention (bytes 0) deletes
    the first segment at once. The queue's first kept offset."""
    declare(http, queue, {"x-retention-bytes": 0})
    body = "x" * (64 * 1024)
    for _ in range(22):
        publish(http, queue, [body] * 50)
    while True:
        got = http.post(f"/api/queues/%2F/{queue}/get",
                        json={"count": 500, "ackmode": "ack_requeue_false",
                              "encoding": "auto", "truncate": 1})
        got.raise_for_status()
        if not got.json():
            break
    wait_until(lambda: queue_view(http, queue)["first_offset"] > 0,
               "retention to delete the first segment", 30)
    return int(queue_view(http, queue)["first_offset"])


def test_fail_on_data_loss_both_ways(spark: Any, broker: BrokerProcess, http: httpx.Client,
                                     tmp_path: Path) -> None:
    first_kept = drop_head_by_retention(http, "lossy")
    end = int(queue_view(http, "lossy")["next_offset"])

    failing = (stream(spark, broker, queue="lossy", startingOffsets='{"lossy": 0}')
               .writeStream.foreachBatch(BatchCollector()).trigger(availableNow=True)
               .option("checkpointLocation", str(tmp_path / "fail")).start())
    with pytest.raises(Exception) as raised:
        failing.awaitTermination(120)
    text = str(raised.value)
    assert "'lossy'" in text and "offset 0 " in text and f"is {first_kept}" in text

    skipping = BatchCollector()
    run_available_now(stream(spark, broker, queue="lossy", startingOffsets='{"lossy": 0}',
                             failOnDataLoss="false"), skipping, tmp_path / "skip")
    assert [offset for _, offset, _ in skipping.rows()] == list(range(first_kept, end))


def test_consumer_group_commits_position_and_lag_and_a_new_query_starts_there(
        spark: Any, broker: BrokerProcess, http: httpx.Client, tmp_path: Path) -> None:
    declare(http, "grouped")
    publish(http, "grouped", [f"g-{i}" for i in range(200)])
    first = BatchCollector()
    # Spark tells a source that a batch is done (commit(end)) when it plans a later batch
    # with new data, so more is published while the query runs.
    query = (stream(spark, broker, queue="grouped", startingOffsets="earliest",
                    consumerGroup="etl").writeStream.foreachBatch(first)
             .trigger(processingTime="200 milliseconds")
             .option("checkpointLocation", str(tmp_path / "first")).start())
    try:
        wait_until(lambda: first.count() >= 200, "the first rows", 60)
        publish(http, "grouped", [f"g-{i}" for i in range(200, 230)])
        wait_until(lambda: http.get("/api/consumer-groups/%2F/etl").status_code == 200,
                   "the group's first commit", 60)
    finally:
        query.stop()
    publish(http, "grouped", [f"g-{i}" for i in range(230, 250)])
    view = http.get("/api/consumer-groups/%2F/etl").json()
    (entry,) = view["queues"]
    committed = entry["committed_offset"]
    assert entry["queue"] == "grouped" and committed in (200, 230)
    assert entry["lag"] == view["lag"] == 250 - committed
    # A new query (new checkpoint) starting from the group's position reads only the rest.
    second = BatchCollector()
    run_available_now(stream(spark, broker, queue="grouped", startingOffsets="group",
                             consumerGroup="etl"), second, tmp_path / "second")
    assert [offset for _, offset, _ in second.rows()] == list(range(committed, 250))
