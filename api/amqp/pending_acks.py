"""`PendingAcks`: a channel's basic.acks of one socket read, settled together.

A consumer that acks every message (pika's and kombu's default) sends tens of
acks per socket read under load. Settling each one alone costs a queue lookup,
a settle call and a pump of the queue per ack (and, for a queue led by another
node, a settle notice per ack); gathered, the read costs one of each per queue.

Invariants, which keep the channel's order of methods observable as before:
* only plain acks gather (tags are checked and taken at once, so a bad tag
  still fails at its own ack); nacks, rejects and acks inside a transaction
  go their usual way;
* the channel calls `flush` before it handles any other method and before it
  closes, so everything after an ack sees it settled, and nothing acked is
  requeued by the close;
* whatever is still gathered at the end of the read is flushed then
  (`after_read`), before the read's output is written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from api.amqp.channel_tx import Settlement
from api.amqp.delivery_tags import Unacked

__all__ = ["PendingAcks"]


class PendingAcks:
    def __init__(self, settle: Callable[[Settlement[Any]], object],
                 after_read: Callable[[Callable[[], None]], None]) -> None:
        self._settle = settle
        self._after_read = after_read
        self._deliveries: list[tuple[int, Unacked[Any]]] = []

    def __bool__(self) -> bool:
        return bool(self._deliveries)

    def add(self, deliveries: list[tuple[int, Unacked[Any]]]) -> None:
        if not deliveries:
            return
        if not self._deliveries:  # the first since the last flush: flush after the read
            self._after_read(self.flush)
        self._deliveries.extend(deliveries)

    def flush(self) -> None:
        """Settle what was gathered (no-op when nothing was)."""
        if self._deliveries:
            deliveries, self._deliveries = self._deliveries, []
            self._settle(Settlement(deliveries, ack=True))
