"""Smoke test: the replication benchmark runs end to end on the 3-node cluster it starts."""

from __future__ import annotations

import pytest

from tests.unit.bench_smoke import run_bench

POSITIVE = ("publish_msg_s", "consume_msg_s", "failover_ms_p50", "failover_ms_p99",
            "catch_up_publish_msg_s", "catch_up_msg_s", "catch_up_s_from_restart",
            "publish_without_catch_up_msg_s", "publish_during_catch_up_msg_s",
            "publish_during_catch_up_ratio", "leader_rss_mib_start",
            "leader_rss_mib_before_catch_up", "leader_rss_mib_after_catch_up",
            "follower_kill_confirm_stall_s")
TARGETS = {"publish_confirm_ge_1x_rabbitmq_quorum", "failover_p50_under_1s",
           "publish_during_catch_up_ge_0_7x", "leader_rss_growth_under_50_mib"}


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_bench_prints_every_figure() -> None:
    result = run_bench("replication_bench.py", [
        "--messages", "300", "--trials", "1", "--rounds", "1", "--catch-up-messages", "3000",
        "--compare-duration-s", "1", "--settle-max-s", "2", "--failover-timeout-s", "15",
        "--stable-timeout-s", "30",
        "--start-timeout-s", "30", "--timeout-s", "30", "--catch-up-timeout-s", "40"],
        timeout_s=85)
    assert result["bench"] == "replication"
    for key in POSITIVE:
        assert isinstance(result[key], float) and result[key] > 0, (key, result)
    assert "rabbitmq_publish_msg_s" not in result and "ratio_publish" not in result
    assert len(result["throughput_trials"]["logbroker"]) == 1
    assert result["failover_rounds"] == 1 and len(result["failover_ms"]) == 1
    round_ = result["failover_details"][0]
    assert round_["killed"] != round_["client"] and round_["new_leader"] != round_["killed"]
    assert result["catch_up_follower"] != result["catch_up_leader"]
    assert result["catch_up_backlog"] >= 3000  # what it missed, plus what came during
    assert isinstance(result["leader_rss_growth_mib"], float)
    assert set(result["targets"]) == TARGETS
    assert result["targets"]["publish_confirm_ge_1x_rabbitmq_quorum"] is None
    assert result["targets"]["failover_p50_under_1s"] == (result["failover_ms_p50"] < 1000)
    assert result["params"]["replicas"] == 3 and result["params"]["rounds"] == 1
    assert result["machine"]["cores"] >= 1
