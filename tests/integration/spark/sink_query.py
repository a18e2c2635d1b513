"""A streaming query in its own process, for the sink's crash test: read queue SOURCE
(logbroker source), slow each row a little so a micro-batch takes a while, and write to
queue TARGET through the logbroker sink, with a checkpoint. The test kills this whole
process group with SIGKILL in the middle of a batch, then runs it again to finish.

    python sink_query.py BROKER_URL SOURCE TARGET CHECKPOINT ROWS_PER_BATCH
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
os.environ["PYSPARK_PYTHON"] = sys.executable


def slow(body: bytes) -> bytes:
    time.sleep(0.001)  # a batch lasts long enough to be killed in its middle
    return body


def main() -> None:
    url, source, target, checkpoint, rows_per_batch = sys.argv[1:6]
    from pyspark.sql import SparkSession, functions
    from pyspark.sql.types import BinaryType

    import connectors.spark
    spark = (SparkSession.builder.master("local[2]").appName("sink-crash")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    connectors.spark.register(spark)
    slow_body = functions.udf(slow, BinaryType())
    rows = (spark.readStream.format("logbroker").option("brokers", url)
            .option("queue", source).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", rows_per_batch).load()
            .select(slow_body("body").alias("body"),
                    functions.lit(target).alias("routing_key")))
    query = (rows.writeStream.format("logbroker").option("brokers", url)
             .option("messagesPerPart", "100")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    print("started", flush=True)
    query.awaitTermination()
    print("done", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
