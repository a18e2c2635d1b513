"""`Admissions`: publishes a queue accepted and has not made ready yet, and refusals.

Accepted messages count against reject-publish limits until they are ready:
publishes admitted back to back would otherwise all see the same ready count
and overshoot `x-max-length`. A refused publish is remembered with its reason
(the REST and WebSocket answers say why) and logged at most once per
`REFUSAL_LOG_S`: a busy publisher must not flood the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from logbroker.message import Message

logger = logging.getLogger(__name__)

REFUSAL_LOG_S = 5.0


class Admissions:
    def __init__(self, queue: str, clock: Callable[[], int]) -> None:
        self._queue = queue
        self._clock = clock
        self.count = 0  # admitted, not ready yet
        self.bytes = 0
        self.refusal = ""  # why the last refused publish was refused
        self._refused = 0  # refused since the last log line about it
        self._logged_ms = 0

    def admitted(self, message: Message) -> None:
        self.count += 1
        self.bytes += message.size_bytes

    def admitted_all(self, messages: Sequence[Message]) -> None:
        self.count += len(messages)
        self.bytes += sum(m.size_bytes for m in messages)

    def settled(self, count: int, total_bytes: int) -> None:
        """`count` messages of `total_bytes` are ready (or their write failed): they
        count no longer."""
        self.count = max(0, self.count - count)
        self.bytes = max(0, self.bytes - total_bytes)

    def refused(self, reason: str, log: bool = False) -> None:
        self.refusal = reason
        if not log:
            return
        self._refused += 1
        now = self._clock()
        if now - self._logged_ms >= REFUSAL_LOG_S * 1000:
            logger.warning("queue %r refused %d publish(es): %s", self._queue, self._refused,
                           reason)
            self._logged_ms, self._refused = now, 0
