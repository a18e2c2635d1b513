"""Spark connector benchmark: the source and the sink against the broker's own rates.

`python bench/spark_bench.py [--messages N]` starts `logbroker serve` on free ports and
a local[2] SparkSession, then prints one JSON line (progress on stderr):
- ws_publish: N messages of `--body-bytes` published over the WebSocket with confirms
  (api.client's publisher): the reference for the sink;
- broker_replay: the queue read back through the REST replay (JSON pages, base64
  bodies, decoded by the client): the reference for the source;
- spark_source: a Trigger.AvailableNow read of the same queue into the `noop` sink;
- spark_sink: N rows of `--body-bytes` written with `df.write.format("logbroker")`, in
  batches of `--sink-batch-rows` (one transactional batch each);
and the ratios source/replay MB/s and sink/ws_publish rows/s (targets >= 0.5).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from api.client import Client, OutgoingMessage  # noqa: E402
from bench.free_ports import free_port  # noqa: E402
from connectors.spark.data_source import LogbrokerDataSource  # noqa: E402
from connectors.spark.queue_reading import read_slice  # noqa: E402
from connectors.spark.record_columns import records_tuples  # noqa: E402
from connectors.spark.source_options import parse_source_options  # noqa: E402
from connectors.spark.stream_reader import LogbrokerStreamReader  # noqa: E402

TARGET = 0.5


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def start_broker(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    http_port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "logbroker", "serve", "--workers", "1",
         "--data-dir", str(data_dir), "--host",
         "127.0.0.1", "--amqp-port", str(free_port()), "--http-port", str(http_port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    url = f"http://127.0.0.1:{http_port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/api/overview", auth=("guest", "guest"), timeout=1).is_success:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError("the broker did not start")


def ws_publish(url: str, queue: str, count: int, body: bytes) -> dict[str, Any]:
    with Client(url) as client:
        client.declare_queue(queue)
        started = time.perf_counter()
        with client.publisher(max_batch=1000, max_in_flight=8) as publisher:
            for start in range(0, count, 10_000):
                batch = [OutgoingMessage(queue, body) for _ in range(min(10_000, count - start))]
                publisher.publish_many(batch)
        seconds = time.perf_counter() - started
    return {"rows": count, "seconds": seconds, "rows_s": count / seconds}


def broker_replay(url: str, queue: str) -> dict[str, Any]:
    payload = rows = 0
    offset = 0
    started = time.perf_counter()
    with httpx.Client(base_url=url, auth=("guest", "guest"), timeout=60) as http:
        while True:
            page = json.loads(http.get(f"/api/queues/%2F/{queue}/messages", params={
                "from_offset": offset, "max_messages": 100_000, "max_bytes": 8 << 20,
                "encoding": "base64"}).content)
            for message in page["messages"]:
                payload += len(base64.b64decode(message["payload"]))
            rows += len(page["messages"])
            if page["next_offset"] >= page["end_offset"] or page["next_offset"] == offset:
                break
            offset = page["next_offset"]
    seconds = time.perf_counter() - started
    return {"rows": rows, "seconds": seconds, "mb_s": payload / seconds / 1e6}


def spark_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    from pyspark.sql import SparkSession

    import connectors.spark
    spark = (SparkSession.builder.master("local[2]").appName("spark-bench")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    connectors.spark.register(spark)
    return spark


class TupleSource(LogbrokerDataSource):
    """The source yielding a tuple per row instead of Arrow batches: only to measure which
    of the two the installed PySpark reads faster (`--compare-tuples`)."""

    @classmethod
    def name(cls) -> str:
        return "logbroker_tuples"

    def streamReader(self, schema: Any) -> LogbrokerStreamReader:
        return TupleStreamReader(parse_source_options(self._options()), 2)


class TupleStreamReader(LogbrokerStreamReader):
    def read(self, partition: Any) -> Any:
        for rows in read_slice(partition.connection, partition.piece,
                               partition.fail_on_data_loss, records_tuples):
            yield from rows


def spark_source(spark: Any, url: str, queue: str, count: int, body_bytes: int,
                 checkpoint: Path, source_format: str = "logbroker") -> dict[str, Any]:
    started = time.perf_counter()
    query = (spark.readStream.format(source_format).option("brokers", url)
             .option("queue", queue)
             .option("startingOffsets", "earliest").load()
             .writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    seconds = time.perf_counter() - started
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    return {"rows": rows, "seconds": seconds, "rows_s": rows / seconds,
            "mb_s": rows * body_bytes / seconds / 1e6}


def spark_sink(spark: Any, url: str, queue: str, count: int, body_bytes: int,
               batch_rows: int) -> dict[str, Any]:
    """`count` rows written as `df.write` batches of `batch_rows` (a transactional batch is
    routed whole, so the broker bounds one: 256 MiB staged)."""
    from pyspark.sql import functions
    with Client(url) as client:
        client.declare_queue(queue)
    frame = spark.range(batch_rows, numPartitions=2).select(
        functions.expr(f"repeat('x', {body_bytes})").cast("binary").alias("body"),
        functions.lit(queue).alias("routing_key")).cache()
    frame.count()  # build the rows before the clock starts: the sink is measured
    started = time.perf_counter()
    written = 0
    for batch_id in range(-(-count // batch_rows)):
        frame.write.format("logbroker").mode("append").option("brokers", url) \
            .option("sinkId", "bench").option("batchId", str(batch_id)).save()
        written += batch_rows
    seconds = time.perf_counter() - started
    return {"rows": written, "seconds": seconds, "rows_s": written / seconds,
            "batch_rows": batch_rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--sink-batch-rows", type=int, default=100_000)
    parser.add_argument("--compare-tuples", action="store_true",
                        help="also read with a tuple per row, to compare with Arrow batches")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    broker, url = start_broker(workdir / "data")
    try:
        body = b"x" * args.body_bytes
        log(f"publishing {args.messages} messages over the WebSocket")
        publish = ws_publish(url, "bench-src", args.messages, body)
        log("replaying through the broker's REST replay")
        replay = broker_replay(url, "bench-src")
        spark = spark_session()
        log("reading with Spark (AvailableNow, noop sink)")
        source = spark_source(spark, url, "bench-src", args.messages, args.body_bytes,
                              workdir / "checkpoint")
        tuples = None
        if args.compare_tuples:
            # Alternated after the first read, which also warmed the JVM and the workers:
            # each way's best of two.
            log("reading with Spark: tuples and Arrow batches, alternated")
            spark.dataSource.register(TupleSource)
            arrow_runs, tuple_runs = [source], []
            for round_ in range(2):
                tuple_runs.append(spark_source(
                    spark, url, "bench-src", args.messages, args.body_bytes,
                    workdir / f"checkpoint-tuples-{round_}", "logbroker_tuples"))
                if round_ == 0:
                    arrow_runs.append(spark_source(
                        spark, url, "bench-src", args.messages, args.body_bytes,
                        workdir / "checkpoint-arrow-1"))
            source = max(arrow_runs, key=lambda run: run["rows_s"])
            tuples = max(tuple_runs, key=lambda run: run["rows_s"])
        log("writing with Spark")
        sink = spark_sink(spark, url, "bench-dst", args.messages, args.body_bytes,
                          min(args.sink_batch_rows, args.messages))
        spark.stop()
        print(json.dumps({
            "bench": "spark", "messages": args.messages, "body_bytes": args.body_bytes,
            "ws_publish": publish, "broker_replay": replay, "spark_source": source,
            "spark_sink": sink,
            **({"spark_source_tuples": tuples,
                "arrow_vs_tuples_rows_s": source["rows_s"] / tuples["rows_s"]}
               if tuples else {}),
            "source_vs_replay_mb_s": source["mb_s"] / replay["mb_s"],
            "sink_vs_ws_publish_rows_s": sink["rows_s"] / publish["rows_s"],
            "target": TARGET}), flush=True)
    finally:
        broker.terminate()
        broker.wait(30)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
