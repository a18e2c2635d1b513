"""Smoke test: the Spark benchmark runs end to end on a tiny queue and reports figures."""

from __future__ import annotations

import pytest

from tests.unit.bench_smoke import run_bench


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_spark_bench_reports_source_and_sink_against_the_broker() -> None:
    result = run_bench("spark_bench.py", ["--messages", "2000"], timeout_s=280)
    assert result["spark_source"]["rows"] == 2000
    assert result["broker_replay"]["rows"] == 2000
    assert result["spark_sink"]["rows"] == 2000
    assert result["source_vs_replay_mb_s"] > 0 and result["sink_vs_ws_publish_rows_s"] > 0
    assert result["target"] == 0.5
