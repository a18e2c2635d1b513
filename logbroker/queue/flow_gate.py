"""The publishers a queue holds back (`PublisherFlow` decides; this keeps the future).

Every publisher held during one hold waits on the same future; the queue's
shell asks `check` after each pump (deliveries change the backlog), and a
timer asks while holding, because a hold also ends on the clock (a stall, the
maximum length).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from logbroker.queue.delivery_sink import DeliverySink
from logbroker.queue.publisher_flow import PublisherFlow
from segments.clock import SYSTEM_CLOCK, Clock

__all__ = ["HOLD_WAIT_MAX_S", "FlowGate", "FlowSample", "of_connection", "take_pending",
           "wait_for_holds"]

HOLD_WAIT_MAX_S = 2.0  # a held reader's backstop: a queue's hold ends by itself well before

# (ready messages, consumers, messages delivered so far)
FlowSample = Callable[[], tuple[int, int, int]]


class FlowGate:
    def __init__(self, sample: FlowSample, flow: PublisherFlow | None = None,
                 clock: Clock = SYSTEM_CLOCK, enabled: bool = True) -> None:
        """`enabled` False: the queue never holds its publishers (the node's config)."""
        self.flow = flow or PublisherFlow()
        self.enabled = enabled
        self._sample = sample
        self._clock = clock
        self._hold: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    def hold(self, connection_id: str = "", sinks: Iterable[DeliverySink] = ()
             ) -> asyncio.Future[None] | None:
        """After a publish to the queue: what its publisher must wait for, if anything.

        Never a connection that consumes from the queue (one of `sinks` is its
        channel): holding it would leave its own acks unread."""
        hold = self._hold
        if hold is None:
            if not self.enabled:
                return None
            ready, consumers, delivered = self._sample()
            if not self.flow.should_hold(ready, consumers, delivered, self._clock.monotonic_ms()):
                return None
            hold = self._hold = asyncio.get_running_loop().create_future()
            self._arm()
        if connection_id and any(of_connection(s.channel_key, connection_id) for s in sinks):
            return None
        return hold

    def check(self) -> None:
        """Release the held publishers if the hold is over."""
        if self._hold is None:
            return
        ready, consumers, delivered = self._sample()
        if self.flow.should_release(ready, consumers, delivered, self._clock.monotonic_ms()):
            self.release()
        elif self._timer is None:
            self._arm()

    def release(self) -> None:
        """End the hold now (the queue is closing, or `check` said so)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        hold, self._hold = self._hold, None
        if self.flow.holding:
            self.flow.should_release(0, 0, self._sample()[2], self._clock.monotonic_ms())
        if hold is not None and not hold.done():
            hold.set_result(None)

    def _arm(self) -> None:
        deadline_ms = self.flow.next_check_ms(self._clock.monotonic_ms())
        if deadline_ms is None:
            return
        delay_s = max(0.0, (deadline_ms - self._clock.monotonic_ms()) / 1000)
        self._timer = asyncio.get_running_loop().call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.check()


def of_connection(channel_key: str, connection_id: str) -> bool:
    """Whether a consumer's channel key belongs to connection `connection_id` (an AMQP
    channel's key is "<connection id>:<channel>"; a WebSocket's is its connection id)."""
    return channel_key == connection_id or channel_key.startswith(connection_id + ":")


def take_pending(holds: list[asyncio.Future[None]]) -> list[asyncio.Future[None]]:
    """The holds in `holds` that are not over yet; `holds` is emptied."""
    pending = [hold for hold in holds if not hold.done()]
    holds.clear()
    return pending


async def wait_for_holds(holds: list[asyncio.Future[None]]) -> None:
    """Wait until every hold is over: each ends by itself (its queue bounds it), and
    `HOLD_WAIT_MAX_S` is a backstop against one that was never let go."""
    if holds:
        await asyncio.wait(holds, timeout=HOLD_WAIT_MAX_S)
