"""Spark for the connector's tests: Java 17 (installed when missing and we are root), one
local[2] SparkSession per test module, UI off, few shuffle partitions.

Without Java the tests fail saying what to install, never skip: a CI run that
skipped them would pass without testing the connector.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.debian_packages import ensure_debian_package

ROOT = Path(__file__).resolve().parents[3]
JAVA_PACKAGE = "openjdk-17-jre-headless"


def java_major() -> int | None:
    java = shutil.which("java")
    if java is None:
        return None
    done = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr + done.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def ensure_java() -> None:
    """Java >= 17 on PATH: install Debian's package when missing and root, else fail."""
    ensure_debian_package(lambda: (java_major() or 0) >= 17, JAVA_PACKAGE,
                          f"the Spark tests (Java 17 or newer on PATH; found: {java_major()})")


@pytest.fixture(scope="session")
def java() -> None:
    ensure_java()


@pytest.fixture(scope="module")
def spark(java: None) -> Iterator[Any]:
    # Python workers are started by the JVM: they must use this interpreter and find the
    # repository (the connector is imported there, not installed).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    path = os.environ.get("PYTHONPATH", "")
    if str(ROOT) not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), path) if p)
    from pyspark.sql import SparkSession

    import connectors.spark
    session = (SparkSession.builder.master("local[2]").appName("logbroker-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.sql.streaming.stopTimeout", "30s")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    connectors.spark.register(session)
    try:
        yield session
    finally:
        session.stop()
