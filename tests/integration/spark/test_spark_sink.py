"""The sink against a real broker: exactly once and atomic per micro-batch, also when
the driver is killed with SIGKILL in the middle of a batch."""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.integration.conftest import BrokerProcess
from tests.integration.spark.spark_helpers import declare, publish, queue_view, wait_until

HERE = Path(__file__).resolve().parent


@pytest.fixture
def http(broker: BrokerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=broker.url, auth=("guest", "guest"), timeout=30.0) as client:
        yield client


def replay_all(http: httpx.Client, queue: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    offset = 0
    while True:
        page = http.get(f"/api/queues/%2F/{quote(queue, safe='')}/messages",
                        params={"from_offset": offset, "max_messages": 10_000,
                                "max_bytes": 16 << 20, "encoding": "base64"}).json()
        out.extend(page["messages"])
        if page["next_offset"] >= page["end_offset"] or page["next_offset"] == offset:
            return out
        offset = page["next_offset"]


def body(message: dict[str, Any]) -> str:
    return base64.b64decode(message["payload"]).decode()


def seq_of(message: dict[str, Any]) -> int:
    return int(message["properties"]["headers"]["x-producer-seq"])


class EndWatcher(threading.Thread):
    """Samples the target queue's end offset while the sink writes: what a consumer can
    see. Every end it saw must fall between two committed batches, never inside one."""

    def __init__(self, url: str, queue: str) -> None:
        super().__init__(daemon=True)
        self.url, self.queue = url, queue
        self.ends: set[int] = set()
        self.running = True

    def run(self) -> None:
        with httpx.Client(base_url=self.url, auth=("guest", "guest"), timeout=10) as client:
            while self.running:
                with contextlib.suppress(httpx.HTTPError):
                    self.ends.add(int(queue_view(client, self.queue)["next_offset"]))
                time.sleep(0.005)


def assert_batches_whole(messages: list[dict[str, Any]], seen_ends: set[int]) -> None:
    seqs = [seq_of(m) for m in messages]
    runs: list[int] = [seq for i, seq in enumerate(seqs) if i == 0 or seqs[i - 1] != seq]
    assert len(runs) == len(set(runs)), f"a batch's messages are not contiguous: {runs}"
    boundaries = {0, len(seqs)} | {i for i in range(1, len(seqs)) if seqs[i - 1] != seqs[i]}
    inside = sorted(seen_ends - boundaries)
    assert not inside, f"a consumer saw the queue end inside a batch at offsets {inside[:5]}"


def test_streaming_write_of_10000_rows_exactly_once(
        spark: Any, broker: BrokerProcess, http: httpx.Client, tmp_path: Path) -> None:
    declare(http, "sink-src")
    declare(http, "sink-dst")
    publish(http, "sink-src", [f"row-{i}" for i in range(10_000)])
    watcher = EndWatcher(broker.url, "sink-dst")
    watcher.start()
    from pyspark.sql import functions
    rows = (spark.readStream.format("logbroker").option("brokers", broker.url)
            .option("queue", "sink-src").option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "2500").load()
            .select("body", functions.lit("sink-dst").alias("routing_key"),
                    functions.create_map(functions.lit("from"),
                                         functions.col("offset").cast("string"))
                    .alias("headers")))
    query = (rows.writeStream.format("logbroker").option("brokers", broker.url)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180)
    assert query.exception() is None
    watcher.running = False
    watcher.join()
    messages = replay_all(http, "sink-dst")
    assert sorted(body(m) for m in messages) == sorted(f"row-{i}" for i in range(10_000))
    assert all(m["properties"]["headers"]["from"] == body(m)[4:] for m in messages)
    assert len({seq_of(m) for m in messages}) == 4  # one transactional batch per trigger
    assert_batches_whole(messages, watcher.ends)


def run_query(broker: BrokerProcess, checkpoint: Path, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, str(HERE / "sink_query.py"), broker.url, "crash-src",
             "crash-dst", str(checkpoint), "1000"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def test_driver_killed_mid_batch_then_restarted_writes_each_row_once(
        broker: BrokerProcess, http: httpx.Client, tmp_path: Path) -> None:
    rows = 10_000
    declare(http, "crash-src")
    declare(http, "crash-dst")
    publish(http, "crash-src", [f"crash-{i}" for i in range(rows)])
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "query.log"
    watcher = EndWatcher(broker.url, "crash-dst")
    watcher.start()
    producer = producer_id(checkpoint)

    def staging_after_a_commit() -> bool:
        """A batch committed and the next one staged, not committed: the middle of it."""
        listing = http.get(f"/api/producers/%2F/{producer}")
        if listing.status_code != 200:
            return False
        view = listing.json()
        return bool(view.get("committed_seqs")) and bool(view.get("open_batches"))

    first = run_query(broker, checkpoint, log)
    try:
        wait_until(staging_after_a_commit, "a batch being staged after a committed one", 180)
        os.killpg(first.pid, signal.SIGKILL)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
    killed_at = queue_view(http, "crash-dst")["next_offset"]
    assert 0 < killed_at < rows, "the kill should land between the first and the last batch"

    second = run_query(broker, checkpoint, log)
    try:
        assert second.wait(300) == 0, log.read_text(errors="replace")[-3000:]
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
    watcher.running = False
    watcher.join()
    messages = replay_all(http, "crash-dst")
    bodies = [body(m) for m in messages]
    assert sorted(bodies) == sorted(f"crash-{i}" for i in range(rows))
    assert_batches_whole(messages, watcher.ends)


def producer_id(checkpoint: Path) -> str:
    from connectors.spark.sink_options import SinkOptions, streaming_producer_id
    from connectors.spark.source_options import Connection
    return streaming_producer_id(SinkOptions(Connection("http://x"), "", "", None,
                                             str(checkpoint), None, 1, 1))
