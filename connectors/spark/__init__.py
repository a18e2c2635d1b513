"""The logbroker Spark connector: `format("logbroker")` for streaming and batch reads and
writes (see docs/spark.md).

    import connectors.spark
    connectors.spark.register(spark)
    spark.readStream.format("logbroker").option("brokers", url).option("queue", "q").load()

It talks to the broker over its public HTTP API only, so it runs in any Spark
executor that can reach a node. Needs PySpark >= 4.2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyspark

from connectors.spark.spark_version import UnsupportedSparkVersion, check_version

check_version(pyspark.__version__)  # before importing APIs an older PySpark lacks

from connectors.spark.data_source import LogbrokerDataSource  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession | Any) -> None:
    """Register the format `logbroker` with the session."""
    check_version(spark.version)
    spark.dataSource.register(LogbrokerDataSource)


__all__ = ["LogbrokerDataSource", "UnsupportedSparkVersion", "register"]
