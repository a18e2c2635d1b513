"""The README's Spark example end to end: its output equals the same aggregation in Python.

`examples/spark_orders/pipeline.py` publishes order events, runs the revenue job
(logbroker source -> 10-second event-time windows with a watermark -> logbroker
sink) and reads the windows back; `run` returns 0 only when they equal
`expected_revenue`, the aggregation computed in plain Python over the same events.
"""

from __future__ import annotations

from typing import Any

import pytest

from examples.spark_orders import pipeline
from tests.integration.conftest import BrokerProcess


def test_the_example_pipeline_matches_plain_python(broker: BrokerProcess, spark: Any,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://guest:guest@127.0.0.1:{broker.http_port}"
    assert pipeline.run(url, count=300, timeout_s=150) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    windows = len(pipeline.expected_revenue(pipeline.order_events(300, 0)))
    assert out.count("window ") == windows and "equal to the same aggregation" in out


def test_the_python_aggregation_is_what_the_job_computes() -> None:
    events = [
        {"customer": "ada", "amount": 10.0, "event_time": 1_000},
        {"customer": "ada", "amount": 5.5, "event_time": 9_999},
        {"customer": "ada", "amount": 1.0, "event_time": 10_000},
        {"customer": "bob", "amount": 2.25, "event_time": 12_000},
        pipeline.watermark_event(12_000),
    ]
    assert pipeline.expected_revenue(events) == {
        (0, "ada"): 15.5, (10_000, "ada"): 1.0, (10_000, "bob"): 2.25}
