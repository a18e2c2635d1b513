"""`PerfRun`: one load run, the asyncio shell around the producers, consumers and limits.

It declares the topology, subscribes the consumers, starts the producers, then
every `CHECK_MS` asks `RunLimits` whether producing is over (and takes a
`Sample` each second, handed to `on_sample`), stops the producers (their
confirms are awaited), asks `RunLimits` whether the consumers have drained,
acks what is left, closes every connection and returns the `Summary`.
`interrupt` (Ctrl-C) ends producing; a second one ends draining.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from api.perf.consumer import Consumer
from api.perf.perf_settings import DEFAULT_WS_WINDOW, PerfSettings
from api.perf.ports import ConsumePort, PublishPort, Transport
from api.perf.producer import Producer
from api.perf.run_limits import Progress, RunLimits
from api.perf.run_stats import RunStats
from api.perf.run_summary import Summary, summarize
from api.perf.sampler import Sample, Sampler
from segments.clock import SYSTEM_CLOCK, Clock

CHECK_MS = 50
MIN_LAST_SAMPLE_MS = 100  # a shorter tail is folded into no sample (the summary has it)


class RunFailed(Exception):
    """A producer or consumer failed (its connection was lost, the broker refused)."""


@dataclass
class _Client:
    task: asyncio.Task[None]
    port: PublishPort | ConsumePort
    consumer: Consumer | None = None


class PerfRun:
    def __init__(self, settings: PerfSettings, transport: Transport,
                 on_sample: Callable[[Sample], None], clock: Clock = SYSTEM_CLOCK,
                 nanos: Callable[[], int] = time.monotonic_ns) -> None:
        # `nanos` stamps the messages: latencies below the clock's millisecond matter here.
        self._settings, self._transport, self._on_sample = settings, transport, on_sample
        self._clock, self._nanos = clock, nanos
        self.stats = RunStats()
        self._stop = asyncio.Event()
        self._producers: list[tuple[Producer, _Client]] = []
        self._consumers: list[_Client] = []
        self._interrupts = 0
        self.failure: BaseException | None = None
        self.sampler: Sampler | None = None
        self.summary: Summary | None = None

    def interrupt(self) -> None:
        self._interrupts += 1

    async def run(self) -> Summary:
        try:
            await self._transport.declare(self._settings)
            await self._start_consumers()
            await self._start_producers()
            self.summary = await self._measure()
            return self.summary
        finally:
            await self._close()

    async def _start_consumers(self) -> None:
        plan = self._settings.topology
        for index in range(self._settings.consumers):
            consumer = Consumer(self._settings, self.stats, self._clock, self._nanos)
            port = await self._transport.consumer(plan.queue_for(index), self._settings,
                                                  consumer.deliver)
            task = asyncio.create_task(consumer.run(port))
            self._consumers.append(_Client(task, port, consumer))

    async def _start_producers(self) -> None:
        settings, plan = self._settings, self._settings.topology
        window = settings.confirm
        if window is None and self._transport.confirms_always:
            window = DEFAULT_WS_WINDOW
        for index in range(settings.producers):
            port = await self._transport.publisher(settings)
            producer = Producer(port, plan.routing_key_for(index), settings, window,
                                self.stats, self._clock, self._nanos)
            self._producers.append((producer, _Client(asyncio.create_task(
                producer.run(self._stop)), port)))

    async def _measure(self) -> Summary:
        start_ms = self._clock.monotonic_ms()
        sampler = self.sampler = Sampler(self.stats, start_ms)
        limits = RunLimits(start_ms, self._settings.time_limit_ms, self._settings.producers > 0)
        while not limits.producing_over(self._progress()):
            await self._tick(sampler)
        self._stop.set()
        producing_end_ms = self._clock.monotonic_ms()
        while not all(producer.done for producer, _ in self._producers):
            await self._tick(sampler)
        while not limits.drained(self._progress()):
            await self._tick(sampler)
        await self._finish_consumers()
        end_ms = self._clock.monotonic_ms()
        if end_ms - sampler.last_ms >= MIN_LAST_SAMPLE_MS:
            self._emit(sampler.sample(end_ms))
        stopped_by = limits.stopped_by or "time limit"
        if self.failure is not None:
            stopped_by = f"failed: {self.failure}"
        return summarize(self.stats, start_ms, producing_end_ms, end_ms, stopped_by)

    def _progress(self) -> Progress:
        self._check_failures()
        last = self.stats.last_received_ms
        return Progress(
            now_ms=self._clock.monotonic_ms(),
            producers_done=all(producer.done for producer, _ in self._producers),
            consumers_done=all(c.consumer is not None and c.consumer.done
                               for c in self._consumers),
            sent=self.stats.counts.sent, received=self.stats.counts.received,
            last_received_ms=last, interrupts=self._interrupts + (self.failure is not None))

    def _check_failures(self) -> None:
        for client in [client for _, client in self._producers] + self._consumers:
            task = client.task
            if self.failure is None and task.done() and not task.cancelled() \
                    and task.exception() is not None:
                self.failure = task.exception()

    async def _tick(self, sampler: Sampler) -> None:
        now_ms = self._clock.monotonic_ms()
        if now_ms >= sampler.next_due_ms:
            self._emit(sampler.sample(now_ms))
        await asyncio.sleep(max(0, min(CHECK_MS, sampler.next_due_ms - now_ms)) / 1000)

    def _emit(self, sample: Sample | None) -> None:
        if sample is not None:
            self._on_sample(sample)

    async def _finish_consumers(self) -> None:
        for client in self._consumers:
            client.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await client.task
            if client.consumer is not None and self.failure is None:
                try:
                    await client.consumer.finish()
                except Exception as error:  # the summary says the run failed
                    self.failure = error

    async def _close(self) -> None:
        self._stop.set()
        clients = [client for _, client in self._producers] + self._consumers
        for client in clients:
            client.task.cancel()
        await asyncio.gather(*(client.task for client in clients), return_exceptions=True)
        await asyncio.gather(*(client.port.close() for client in clients),
                             return_exceptions=True)
        await self._transport.close()
