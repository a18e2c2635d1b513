"""ProducerBatches in process: commit once, and finish a commit the node did not finish."""

from __future__ import annotations

from pathlib import Path

import pytest

from logbroker.broker import Broker
from logbroker.broker_config import BrokerConfig, Session
from logbroker.message import Message
from logbroker.metadata import CommitProducerBatch
from logbroker.producer_batches import BatchConflict, ProducerBatches
from segments.clock import ManualClock

SESSION = Session("conn-1", "guest", "/")


def bodies(broker: Broker, queue: str) -> list[bytes]:
    shell = broker.queue("/", queue)
    assert shell is not None
    return [record.value for record in shell.log.read(0, 1 << 20)]


async def open_broker(tmp_path: Path) -> Broker:
    broker = Broker.open(BrokerConfig(data_dir=str(tmp_path)))
    for name in ("a", "b"):
        await broker.definitions.declare_queue(SESSION, name, durable=True)
    await broker.definitions.declare_exchange(SESSION, "fan", "fanout", durable=True)
    for name in ("a", "b"):
        await broker.definitions.bind_queue(SESSION, name, "fan", "")
    return broker


async def test_a_commit_publishes_once_and_stamps_the_messages(tmp_path: Path) -> None:
    broker = await open_broker(tmp_path)
    batches = broker.producer_batches
    part = await batches.stage("/", "p", 0, [Message("fan", "", b"x"), Message("fan", "", b"y")])
    outcome = await batches.commit("/", "p", 0, [part])
    assert (outcome.duplicate, outcome.messages) == (False, 2)
    assert (await batches.commit("/", "p", 0, [part])).duplicate
    assert bodies(broker, "a") == bodies(broker, "b") == [b"x", b"y"]
    shell = broker.queue("/", "a")
    assert shell is not None
    stamped = Message.from_record(shell.log.read(0)[0]).headers
    assert stamped == {"x-producer-id": "p", "x-producer-seq": 0}
    record = broker.state.producer("/", "p")
    assert record is not None and record.pending == ()
    with pytest.raises(BatchConflict):
        await batches.stage("/", "p", 0, [Message("fan", "", b"late")])
    assert batches.open_batches("/", "p") == []  # the staging queue went with the commit
    await broker.close()


async def test_a_pending_commit_is_finished_where_it_was_not(tmp_path: Path) -> None:
    """The node stopped after the commit record and after queue `a` took its share."""
    broker = await open_broker(tmp_path)
    batches = broker.producer_batches
    await broker.apply(CommitProducerBatch("/", "p", 4, 0))
    await broker.definitions.bind_queue(SESSION, "b", "fan", "", unbind=True)
    part = await batches.stage("/", "p", 4, [Message("fan", "", b"m1"),
                                             Message("fan", "", b"m2")])
    # Publish as the interrupted commit did, to `a` only (b is unbound for that).
    parts = batches.staging.parts("/", "p", 4)
    assert parts is not None
    for message in parts[part]:
        await broker.publisher.publish("/", message)
    await broker.definitions.bind_queue(SESSION, "b", "fan", "")
    # The producer saw no answer and commits again: the staged parts are still there.
    again = part
    outcome = await batches.commit("/", "p", 4, [again])
    assert not outcome.duplicate
    assert bodies(broker, "a") == [b"m1", b"m2"]  # not twice
    assert bodies(broker, "b") == [b"m1", b"m2"]  # finished
    record = broker.state.producer("/", "p")
    assert record is not None and record.pending == ()
    assert (await batches.commit("/", "p", 4, [again])).duplicate
    await broker.close()


class _Endpoint:
    def __init__(self, holds: bool) -> None:
        self.holds = holds
        self.asked: list[tuple[str, int, int]] = []

    async def holds_batch(self, producer: str, seq: int, since_ms: int) -> bool:
        self.asked.append((producer, seq, since_ms))
        return self.holds


class _Remote:
    """Queues led by other nodes: `r-held` has the batch already, `r-missing` not."""

    def __init__(self) -> None:
        self.endpoints = {"r-held": _Endpoint(True), "r-missing": _Endpoint(False)}
        self.published: list[tuple[bytes, list[str]]] = []

    def endpoint(self, vhost: str, name: str) -> _Endpoint:
        return self.endpoints[name]

    async def publish(self, vhost: str, items: list[tuple[Message, list[str]]]) -> list[bool]:
        self.published.extend((message.body, names) for message, names in items)
        return [True] * len(items)


async def test_a_pending_batch_skips_queues_led_elsewhere_that_hold_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broker = await open_broker(tmp_path)
    remote = _Remote()
    batches = ProducerBatches(lambda: broker.state, broker.apply, broker.publisher,
                              lambda: remote,  # type: ignore[arg-type,return-value]
                              broker.producer_batches.staging)
    monkeypatch.setattr(broker.publisher, "route_all",
                        lambda vhost, exchange, message: ([], ["r-held", "r-missing"]))
    await broker.apply(CommitProducerBatch("/", "p", 2, 1234))
    part = await batches.stage("/", "p", 2, [Message("fan", "", b"x")])
    outcome = await batches.commit("/", "p", 2, [part])
    assert (outcome.duplicate, outcome.messages, outcome.refused) == (False, 1, 0)
    assert remote.endpoints["r-held"].asked == [("p", 2, 1234)]
    assert remote.published == [(b"x", ["r-missing"])]  # not to the queue that has it
    await broker.close()


async def test_the_commit_time_comes_from_the_brokers_clock(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=1_800_000_000_000)
    broker = Broker.open(BrokerConfig(data_dir=str(tmp_path)), clock=clock)
    await broker.definitions.declare_queue(SESSION, "a", durable=True)
    part = await broker.producer_batches.stage("/", "p", 0, [Message("", "a", b"x")])
    await broker.producer_batches.commit("/", "p", 0, [part])
    record = broker.state.producer("/", "p")
    assert record is not None and record.last_commit_ms == 1_800_000_000_000
    await broker.close()
