"""Smoke test: the federation benchmark runs two brokers and reports both rates."""

from __future__ import annotations

import pytest

from tests.unit.bench_smoke import run_bench


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_federation_bench_reports_the_link_against_local_publishing() -> None:
    result = run_bench("federation_bench.py", ["--messages", "300"], timeout_s=170)
    assert result["bench"] == "federation" and result["messages"] == 300
    assert result["local_msgs_s"] > 0 and result["link_msgs_s"] > 0
    # The rates are rounded to whole msgs/s before the ratio is shown next to them.
    assert abs(result["link_ratio"] - result["link_msgs_s"] / result["local_msgs_s"]) < 0.01


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_federation_bench_times_a_queue_link_when_asked() -> None:
    result = run_bench("federation_bench.py", ["--messages", "300", "--queue-link"],
                       timeout_s=170)
    assert result["queue_link_msgs_s"] > 0 and result["link_msgs_s"] > 0
