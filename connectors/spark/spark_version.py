"""Which PySpark the connector needs: 4.2 or newer, for stream admission control.

PySpark 4.2 added `latestOffset(start, limit)` and `getDefaultReadLimit()` to
Python stream readers; on an older one `maxOffsetsPerTrigger` could not be
honoured, so the connector refuses to load rather than ignore the option.
"""

from __future__ import annotations

import re

REQUIRED = (4, 2)


class UnsupportedSparkVersion(RuntimeError):
    pass


def parse_version(text: str) -> tuple[int, int]:
    """(major, minor) of a version string such as "4.3.0" or "4.2.0.dev1"."""
    match = re.match(r"\s*(\d+)\.(\d+)", text)
    if match is None:
        raise UnsupportedSparkVersion(f"cannot read the PySpark version {text!r}")
    return int(match.group(1)), int(match.group(2))


def check_version(text: str) -> None:
    """Raise UnsupportedSparkVersion naming what to install when `text` is older than 4.2."""
    if parse_version(text) < REQUIRED:
        raise UnsupportedSparkVersion(
            f"the logbroker Spark connector needs PySpark >= {REQUIRED[0]}.{REQUIRED[1]} "
            f"(stream admission control: latestOffset(start, limit)); this is PySpark {text}. "
            f"Install it with: pip install 'pyspark>=4.2'")
