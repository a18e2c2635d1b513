"""What a queue has done since it was opened, for rates and metrics, and who waits for appends."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass


@dataclass
class QueueCounters:
    published: int = 0
    delivered: int = 0  # to consumers and basic.get / REST get, redeliveries included
    redelivered: int = 0
    acked: int = 0
    got: int = 0  # of `delivered`: taken by basic.get / REST get, not by a consumer

    def count_delivery(self, redelivered: bool, got: bool) -> None:
        self.delivered += 1
        self.redelivered += redelivered
        self.got += got

    def count_acks(self, count: int) -> None:
        self.acked += count

    def handed_out(self) -> dict[str, int]:
        """Deliveries and acks under RabbitMQ's `message_stats` names."""
        return {"deliver_get": self.delivered, "deliver": self.delivered - self.got,
                "get": self.got, "redeliver": self.redelivered, "ack": self.acked}


class AppendWaiters:
    """Lets readers that follow a queue's log (replay --follow) sleep until it grows."""

    def __init__(self) -> None:
        self._grown: asyncio.Event | None = None
        self.notified = 0  # how many times it grew (the simulation's parked fetches read it)

    def notify(self) -> None:
        self.notified += 1
        if self._grown is not None:
            self._grown.set()
            self._grown = None

    async def wait(self, timeout_s: float) -> None:
        """Return when the log grows, or after `timeout_s` (the caller re-checks either way)."""
        if self._grown is None:
            self._grown = asyncio.Event()
        grown = self._grown
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(grown.wait(), timeout_s)
