"""Admissions: counts of admitted, not-ready publishes; refusals remembered, logged sparingly."""

import logging

import pytest

from logbroker.message import Message
from logbroker.queue.admissions import REFUSAL_LOG_S, Admissions


def test_admitted_messages_count_until_settled() -> None:
    admissions = Admissions("q", lambda: 0)
    one, two = Message("", "q", b"x" * 10), Message("", "q", b"y" * 5)
    admissions.admitted(one)
    admissions.admitted(two)
    assert (admissions.count, admissions.bytes) == (2, 15)
    admissions.settled(1, 10)
    assert (admissions.count, admissions.bytes) == (1, 5)
    admissions.settled(2, 15)  # never below zero
    assert (admissions.count, admissions.bytes) == (0, 0)


def test_refusals_keep_their_reason_and_log_once_per_interval(
        caplog: pytest.LogCaptureFixture) -> None:
    now = [1_700_000_000_000]  # wall-clock milliseconds, as the shell's clock gives
    admissions = Admissions("q", lambda: now[0])
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            admissions.refused("too few in-sync replicas", log=True)
        now[0] += int(REFUSAL_LOG_S * 1000)
        admissions.refused("too few in-sync replicas", log=True)
        admissions.refused("queue 'q' is full (x-overflow reject-publish)")
    assert admissions.refusal == "queue 'q' is full (x-overflow reject-publish)"
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["queue 'q' refused 1 publish(es): too few in-sync replicas",
                     "queue 'q' refused 3 publish(es): too few in-sync replicas"]
