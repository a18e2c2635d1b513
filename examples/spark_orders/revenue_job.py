"""The Spark job of the orders pipeline: revenue per customer per 10-second window.

Runs inside `pipeline.py` on `local[2]`, or on a cluster:

    spark-submit --master spark://HOST:7077 --py-files logbroker.zip \\
        examples/spark_orders/revenue_job.py --brokers URL[,URL...] --checkpoint DIR

`--brokers` lists several nodes: the connector fails over to the next one and
follows a queue's leader after a failover.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

import connectors.spark

ORDER = StructType([
    StructField("order_id", LongType()),
    StructField("customer", StringType()),
    StructField("region", StringType()),
    StructField("amount", DoubleType()),
    StructField("event_time", LongType()),  # ms since the epoch
])


def spark_session(master: str = "local[2]") -> SparkSession:
    spark = (SparkSession.builder.master(master).appName("logbroker-orders")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    connectors.spark.register(spark)
    return spark


def revenue_windows(orders: DataFrame) -> DataFrame:
    """Parsed orders -> one row per closed (window, customer): the sink's columns."""
    parsed = (orders.select(F.from_json(F.col("body").cast("string"), ORDER).alias("o"))
              .select("o.*")
              .withColumn("ts", F.timestamp_millis("event_time"))
              .withWatermark("ts", "5 seconds"))
    # `_tick` rows only move the watermark. They are dropped by a condition on an
    # aggregate: Spark pushes a filter on `customer` below the watermark, which then
    # never sees them.
    totals = (parsed.groupBy(F.window("ts", "10 seconds"), "customer")
              .agg(F.round(F.sum("amount"), 2).alias("revenue"),
                   F.count(F.when(F.col("customer") != "_tick", 1)).alias("orders"))
              .where(F.col("orders") > 0))
    row = F.struct(
        F.unix_millis(F.col("window.start")).alias("window_start_ms"),
        F.unix_millis(F.col("window.end")).alias("window_end_ms"),
        F.col("customer"), F.col("revenue"), F.col("orders"))
    return totals.select(
        F.to_json(row).alias("body"),
        F.concat(F.lit("revenue."), F.col("customer")).alias("routing_key"))


def revenue_query(spark: SparkSession, brokers: str, checkpoint: str,
                  starting_offsets: str = "earliest", trigger_s: float = 1.0) -> StreamingQuery:
    orders = (spark.readStream.format("logbroker")
              .option("brokers", brokers)
              .option("queue", "orders.all")
              .option("startingOffsets", starting_offsets)
              .load())
    return (revenue_windows(orders).writeStream.format("logbroker")
            .option("brokers", brokers)
            .option("exchange", "revenue")
            .option("checkpointLocation", checkpoint)
            .outputMode("append")
            .trigger(processingTime=f"{trigger_s} seconds")
            .start())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="revenue per customer per 10-second window")
    parser.add_argument("--brokers", required=True, help="comma-separated node URLs")
    parser.add_argument("--checkpoint", required=True, help="a directory Spark can write")
    parser.add_argument("--master", default=None, help="omit under spark-submit")
    args = parser.parse_args(argv)
    spark = spark_session(args.master) if args.master else spark_session_from_submit()
    revenue_query(spark, args.brokers, args.checkpoint).awaitTermination()
    return 0


def spark_session_from_submit() -> SparkSession:
    spark = SparkSession.builder.appName("logbroker-orders").getOrCreate()
    connectors.spark.register(spark)
    return spark


if __name__ == "__main__":
    sys.exit(main())
