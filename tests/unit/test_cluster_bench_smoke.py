"""Smoke test: the cluster benchmark runs end to end on the 3-node cluster it starts."""

from __future__ import annotations

import pytest

from tests.unit.bench_smoke import run_bench

POSITIVE = ("election_ms_p50", "election_ms_p99", "declare_ms_p50_follower",
            "declare_ms_p99_follower", "declare_ms_p50_leader", "declare_ms_p99_leader",
            "direct_publish_msg_s", "forwarded_publish_msg_s", "direct_consume_msg_s",
            "forwarded_consume_msg_s", "forwarding_ratio_publish", "forwarding_ratio_consume")


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_bench_prints_every_figure() -> None:
    result = run_bench("cluster_bench.py", [
        "--rounds", "2", "--declares", "20", "--messages", "500", "--trials", "1",
        "--election-timeout-s", "15", "--stable-timeout-s", "30", "--start-timeout-s", "30",
        "--timeout-s", "30"], timeout_s=85)
    assert result["bench"] == "cluster"
    for key in POSITIVE:
        assert isinstance(result[key], float) and result[key] > 0, (key, result)
    assert result["election_rounds"] == 2 and len(result["election_ms"]) == 2
    assert len(result["killed_leaders"]) == 2
    assert result["declares"] == 20
    assert result["queue_leader_node"] != result["forwarded_via_node"]
    assert set(result["targets"]) == {"election_p50_under_1s", "forwarding_ratio_at_least_0_7"}
    assert all(isinstance(met, bool) for met in result["targets"].values())
    assert result["targets"]["election_p50_under_1s"] == (result["election_ms_p50"] < 1000)
