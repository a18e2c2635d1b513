"""PublishRefusals: the last refusal's reason remembered, refusals logged sparingly."""

import logging

import pytest

from logbroker.queue.publish_refusals import REFUSAL_LOG_MS, PublishRefusals
from segments.clock import ManualClock


def test_refusals_keep_their_reason_and_log_once_per_interval(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    refusals = PublishRefusals("q", clock)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            refusals.refused("too few in-sync replicas", log=True)
        clock.advance(REFUSAL_LOG_MS)
        refusals.refused("too few in-sync replicas", log=True)
        refusals.refused("queue 'q' is full (x-overflow reject-publish)")
    assert refusals.last == "queue 'q' is full (x-overflow reject-publish)"
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["queue 'q' refused 1 publish(es): too few in-sync replicas",
                     "queue 'q' refused 3 publish(es): too few in-sync replicas"]
