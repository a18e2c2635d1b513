"""`Consumer`: takes its deliveries in order, measures their latency, acks them.

The transport hands each delivery to `deliver`, which puts it into the inbox:
at once when acking (the prefetch, `--qos`, bounds what can be there, and
the order stays the delivery order), else waiting for room (autoack has no
prefetch bound). One task takes them in order (so a multiple ack never
passes a single one), waits for the pace of
`--consumer-rate`, records the latency from the body's stamp, and acks: each
message, or every `--multi-ack-every` with `multiple`, or not at all with
`--autoack`. At `--cmessages` it cancels its subscription and ignores what
still comes (the broker takes back what it sent past the limit when the
connection closes). `finish` acks what a multiple ack left over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from api.perf.pacing import Pacer
from api.perf.perf_settings import PerfSettings
from api.perf.ports import ConsumePort, Delivery
from api.perf.producer import stamp_of
from api.perf.run_stats import RunStats
from segments.clock import Clock

INBOX_BOUND = 10_000  # with autoack (no prefetch bound) the transport waits past this


class Consumer:
    def __init__(self, settings: PerfSettings, stats: RunStats, clock: Clock,
                 nanos: Callable[[], int]) -> None:
        self._acks = not settings.autoack
        self.inbox: asyncio.Queue[Delivery] = asyncio.Queue(0 if self._acks else INBOX_BOUND)
        self._limit, self._rate = settings.cmessages, settings.consumer_rate
        self._ack_every = max(settings.multi_ack_every, 1)
        self._stats, self._clock, self._nanos = stats, clock, nanos
        self._port: ConsumePort | None = None
        self._unacked, self._last_tag = 0, 0
        self.received = 0
        self.done = False

    async def deliver(self, body: bytes, tag: int) -> None:
        if self.done:
            return  # past --cmessages: the broker takes it back at close
        if self._acks:
            self.inbox.put_nowait((body, tag))
        else:
            await self.inbox.put((body, tag))

    async def run(self, port: ConsumePort) -> None:
        """Take deliveries until the limit (then `done`), or until cancelled."""
        self._port = port
        pacer = Pacer(self._rate, self._clock.monotonic_ms())
        while self._limit is None or self.received < self._limit:
            body, tag = await self.inbox.get()
            wait_ms = pacer.wait_ms(self._clock.monotonic_ms(), self.received)
            if wait_ms > 0:
                await asyncio.sleep(wait_ms / 1000)
            self._take(body)
            await self._settle(tag)
        self.done = True
        await port.cancel()

    def _take(self, body: bytes) -> None:
        self.received += 1
        stamp = stamp_of(body)
        latency_us = 0 if stamp is None else max(0, (self._nanos() - stamp) // 1000)
        self._stats.received(latency_us, self._clock.monotonic_ms())

    async def _settle(self, tag: int) -> None:
        if not self._acks or self._port is None:
            return
        self._unacked, self._last_tag = self._unacked + 1, tag
        if self._unacked >= self._ack_every:
            # Counted as acked before the await: cancelled there, `finish` must not ack the
            # tag again (a broker closes the channel on an unknown tag).
            self._unacked = 0
            await self._port.ack(tag, multiple=self._ack_every > 1)

    async def finish(self) -> None:
        """Ack what is left of a multiple ack (the loop is stopped first)."""
        if self._unacked and self._port is not None:
            await self._port.ack(self._last_tag, multiple=True)
            self._unacked = 0
