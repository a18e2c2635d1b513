"""`PublishRefusals`: why a queue last refused a publish, and a log of refusals kept sparse.

A refused publish is remembered with its reason (the REST and WebSocket
answers say why), and a refusal the operator should hear about (too few
in-sync replicas) is logged at most once per `REFUSAL_LOG_MS`: a busy
publisher must not flood the log.
"""

from __future__ import annotations

import logging

from segments.clock import SYSTEM_CLOCK, Clock

logger = logging.getLogger(__name__)

REFUSAL_LOG_MS = 5_000


class PublishRefusals:
    def __init__(self, queue: str, clock: Clock = SYSTEM_CLOCK) -> None:
        self._queue = queue
        self._clock = clock
        self.last = ""  # why the last refused publish was refused
        self._unlogged = 0  # refused since the last log line about it
        self._logged_ms: int | None = None

    def refused(self, reason: str, log: bool = False) -> None:
        self.last = reason
        if not log:
            return
        self._unlogged += 1
        now = self._clock.monotonic_ms()
        if self._logged_ms is None or now - self._logged_ms >= REFUSAL_LOG_MS:
            logger.warning("queue %r refused %d publish(es): %s", self._queue, self._unlogged,
                           reason)
            self._logged_ms, self._unlogged = now, 0
