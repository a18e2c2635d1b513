"""`PerfRun` with `Producer` and `Consumer` over an in-memory transport: the counts add up,
acks follow --multi-ack-every, limits and interrupts end the run, a failure is reported."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace

import pytest

from api.perf.perf_run import PerfRun
from api.perf.perf_settings import PerfSettings
from api.perf.ports import ConsumePort, Deliver, Outcome, PublishPort
from api.perf.producer import stamp_of, stamped_body
from api.perf.sampler import Sample
from api.perf.topology_plan import plan_topology


@dataclass
class MemoryConsumer:
    acks: list[tuple[int, bool]]
    task: asyncio.Task[None] | None = None

    async def ack(self, tag: int, multiple: bool) -> None:
        self.acks.append((tag, multiple))

    async def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def close(self) -> None:
        await self.cancel()


@dataclass
class MemoryPublisher:
    broker: MemoryBroker

    async def publish(self, routing_key: str, body: bytes) -> Outcome:
        if self.broker.fail_after is not None and self.broker.published >= self.broker.fail_after:
            raise ConnectionError("the broker went away")
        self.broker.published += 1
        await self.broker.queues.setdefault(routing_key, asyncio.Queue()).put(body)
        return Outcome.CONFIRMED if self.broker.confirms else Outcome.SENT

    async def close(self) -> None:
        pass


@dataclass
class MemoryBroker:
    confirms: bool = True
    confirms_always: bool = False
    fail_after: int | None = None
    published: int = 0
    queues: dict[str, asyncio.Queue[bytes]] = field(default_factory=dict)
    acks: list[tuple[int, bool]] = field(default_factory=list)
    declared: list[str] = field(default_factory=list)

    async def declare(self, settings: PerfSettings) -> None:
        self.declared.extend(settings.topology.queues)

    async def publisher(self, settings: PerfSettings) -> PublishPort:
        return MemoryPublisher(self)

    async def consumer(self, queue: str, settings: PerfSettings, deliver: Deliver
                       ) -> ConsumePort:
        port = MemoryConsumer(self.acks)
        inbox = self.queues.setdefault(queue, asyncio.Queue())

        async def pump() -> None:
            tag = 0
            while True:
                body = await inbox.get()
                tag += 1
                await deliver(body, tag)

        port.task = asyncio.create_task(pump())
        return port

    async def close(self) -> None:
        pass


def settings(**changes: object) -> PerfSettings:
    base = PerfSettings(topology=plan_topology("", "direct", ("q",), None, pattern=False),
                        time_s=0.3, rate=500.0, confirm=5)
    return replace(base, **changes)  # type: ignore[arg-type]


async def run(broker: MemoryBroker, chosen: PerfSettings,
              interrupt_after_s: float | None = None) -> tuple[PerfRun, list[Sample]]:
    samples: list[Sample] = []
    perf = PerfRun(chosen, broker, samples.append)
    if interrupt_after_s is not None:
        asyncio.get_running_loop().call_later(interrupt_after_s, perf.interrupt)
    async with asyncio.timeout(20):
        await perf.run()
    return perf, samples


async def test_every_message_sent_is_confirmed_and_received() -> None:
    broker = MemoryBroker()
    perf, samples = await run(broker, settings())
    summary = perf.summary
    assert summary is not None and summary.stopped_by == "time limit"
    assert summary.sent == summary.confirmed == summary.received == broker.published > 0
    assert summary.latency_max_ms is not None
    assert samples and samples[-1].elapsed_s == summary.duration_s
    assert broker.acks == [(tag, False) for tag in range(1, summary.received + 1)]
    assert broker.declared == ["q"]


async def test_multi_ack_acks_every_n_and_the_rest_at_the_end() -> None:
    broker = MemoryBroker(confirms=False)
    perf, _ = await run(broker, settings(confirm=None, multi_ack_every=10, pmessages=25,
                                         rate=None))
    assert perf.summary is not None and perf.summary.stopped_by == "producer message limit"
    assert (perf.summary.sent, perf.summary.confirmed, perf.summary.received) == (25, 0, 25)
    assert broker.acks == [(10, True), (20, True), (25, True)]


async def test_autoack_sends_no_acks() -> None:
    broker = MemoryBroker()
    perf, _ = await run(broker, settings(autoack=True, pmessages=20, rate=None))
    assert perf.summary is not None and perf.summary.received == 20
    assert broker.acks == []


async def test_consumer_limit_ends_a_run_without_producers() -> None:
    broker = MemoryBroker()
    queue = broker.queues.setdefault("q", asyncio.Queue())
    for sequence in range(30):
        queue.put_nowait(stamped_body(0, sequence, b""))
    perf, _ = await run(broker, settings(producers=0, cmessages=12, time_s=10.0))
    assert perf.summary is not None
    assert (perf.summary.stopped_by, perf.summary.received) == ("consumer message limit", 12)


async def test_an_interrupt_ends_the_run_with_a_summary() -> None:
    broker = MemoryBroker()
    perf, _ = await run(broker, settings(time_s=60.0), interrupt_after_s=0.2)
    assert perf.summary is not None and perf.summary.stopped_by == "interrupt"
    assert perf.summary.sent == perf.summary.received


async def test_a_failing_producer_is_reported() -> None:
    broker = MemoryBroker(fail_after=7)
    perf, _ = await run(broker, settings(time_s=10.0))
    assert isinstance(perf.failure, ConnectionError)
    assert perf.summary is not None and perf.summary.stopped_by.startswith("failed:")
    assert perf.summary.confirmed == 7


def test_a_body_carries_its_stamp_and_padding() -> None:
    body = stamped_body(123_456_789, 7, bytes(20))
    assert len(body) == 32 and stamp_of(body) == 123_456_789
    assert stamp_of(b"short") is None


@pytest.mark.parametrize(("changes", "flag"), [
    ({"producers": 0, "consumers": 0}, "nothing to run"),
    ({"size": 11}, "--size"),
    ({"time_s": 0.0}, "--time"),
    ({"qos": 5, "multi_ack_every": 6}, "--multi-ack-every"),
    ({"autoack": True, "multi_ack_every": 2}, "--multi-ack-every needs acks"),
    ({"qos": 0}, "--qos 0"),
    ({"autoack": True, "consumer_rate": 10.0}, "--consumer-rate"),
])
def test_settings_that_make_no_sense_are_named(changes: dict[str, object], flag: str) -> None:
    with pytest.raises(ValueError, match=flag):
        settings(**changes).check()
