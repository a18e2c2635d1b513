"""`Producer`: publishes stamped messages at its pace, with a window of unconfirmed ones.

Each body starts with the send time (ns) and the producer's sequence number,
then padding up to `--size`. Without a window a publish is awaited before the
next one (the transport's write back-pressure); with one, up to `window`
publishes wait for their confirms at once, each in a task. `stop` ends the
loop; the confirms still on their way are awaited, at most
`CONFIRM_TIMEOUT_S`, and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Callable

from api.perf.pacing import Pacer
from api.perf.perf_settings import STAMP_BYTES, PerfSettings
from api.perf.ports import Outcome, PublishPort
from api.perf.run_stats import RunStats
from segments.clock import Clock

STAMP = struct.Struct(">QI")
POLL_S = 0.1  # how often a waiting producer looks at `stop`
CONFIRM_TIMEOUT_S = 30.0


def stamped_body(sent_ns: int, sequence: int, padding: bytes) -> bytes:
    return STAMP.pack(sent_ns, sequence & 0xFFFFFFFF) + padding


def stamp_of(body: bytes) -> int | None:
    """The send time in a body, or None for a message that is not one of ours."""
    return STAMP.unpack_from(body)[0] if len(body) >= STAMP_BYTES else None


class Producer:
    def __init__(self, port: PublishPort, routing_key: str, settings: PerfSettings,
                 window: int | None, stats: RunStats, clock: Clock,
                 nanos: Callable[[], int]) -> None:
        self._port, self._routing_key = port, routing_key
        self._limit, self._rate = settings.pmessages, settings.rate
        self._padding = bytes(settings.size - STAMP_BYTES)
        self._window = asyncio.Semaphore(window) if window else None
        self._stats, self._clock, self._nanos = stats, clock, nanos
        self._in_flight: set[asyncio.Task[None]] = set()
        self._error: Exception | None = None
        self.sent = 0
        self.done = False

    async def run(self, stop: asyncio.Event) -> None:
        pacer = Pacer(self._rate, self._clock.monotonic_ms())
        try:
            while not stop.is_set() and (self._limit is None or self.sent < self._limit):
                if self._error is not None:
                    raise self._error
                wait_ms = pacer.wait_ms(self._clock.monotonic_ms(), self.sent)
                if wait_ms > 0:
                    await asyncio.sleep(min(wait_ms / 1000, POLL_S))
                    continue
                if self._window is not None and not await self._slot(stop):
                    break
                await self._publish()
            await self._settle_in_flight()
            if self._error is not None:
                raise self._error
        finally:
            self.done = True

    async def _slot(self, stop: asyncio.Event) -> bool:
        assert self._window is not None
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_S):
                    await self._window.acquire()
                    return True
        return False

    async def _publish(self) -> None:
        body = stamped_body(self._nanos(), self.sent, self._padding)
        self.sent += 1
        self._stats.counts.sent += 1
        if self._window is None:
            self._count(await self._port.publish(self._routing_key, body))
            return
        task = asyncio.create_task(self._confirmed(body))
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def _confirmed(self, body: bytes) -> None:
        assert self._window is not None
        try:
            self._count(await self._port.publish(self._routing_key, body))
        except Exception as error:  # the loop raises it: the run reports it
            self._error = self._error or error
        finally:
            self._window.release()

    def _count(self, outcome: Outcome) -> None:
        counts = self._stats.counts
        if outcome is Outcome.CONFIRMED:
            counts.confirmed += 1
        elif outcome is Outcome.NACKED:
            counts.nacked += 1
        elif outcome is Outcome.RETURNED:
            counts.returned += 1

    async def _settle_in_flight(self) -> None:
        if self._in_flight:
            await asyncio.wait(set(self._in_flight), timeout=CONFIRM_TIMEOUT_S)
