"""ChannelSession and PublishPipeline on an in-process broker, with a recording machine."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pamqp import base, commands

from api.amqp.channel_session import ChannelSession
from api.amqp.connection_context import IN_FLIGHT_UNIT, ConnectionContext
from api.amqp.events import Acks, ChannelMethod, Publish
from api.amqp.publish_pipeline import PublishPipeline
from api.connection_flow import ConnectionFlow
from logbroker.broker import Broker
from logbroker.broker_config import BrokerConfig, Session
from logbroker.message import Message
from logbroker.message_stats import MessageStats
from logbroker.publishing import PublishResult
from logbroker.queue.replication_gate import GateFenced, NotEnoughReplicas

Properties = commands.Basic.Properties


@dataclass
class RecordingMachine:
    """Stands in for AmqpConnection: records what the broker layer sends."""

    sent: list[tuple[int, base.Frame, bytes | None]] = field(default_factory=list)
    channel_closes: list[tuple[int, int, str, int, int]] = field(default_factory=list)
    connection_closes: list[tuple[int, str, int, int]] = field(default_factory=list)

    def send_method(self, channel: int, method: base.Frame) -> bool:
        self.sent.append((channel, method, None))
        return True

    def send_content(self, channel: int, method: base.Frame, _props: Properties,
                     body: bytes) -> bool:
        self.sent.append((channel, method, body))
        return True

    def send_deliver(self, channel: int, consumer_tag: str, delivery_tag: int,
                     redelivered: bool, exchange: str, routing_key: str, _props: bytes,
                     body: bytes) -> bool:
        self.sent.append((channel, commands.Basic.Deliver(
            consumer_tag, delivery_tag, redelivered, exchange, routing_key), body))
        return True

    def close_channel(self, channel: int, code: int, text: str, class_id: int = 0,
                      method_id: int = 0) -> bool:
        self.channel_closes.append((channel, code, text, class_id, method_id))
        return True

    def close_connection(self, code: int, text: str, class_id: int = 0,
                         method_id: int = 0) -> bool:
        self.connection_closes.append((code, text, class_id, method_id))
        return True

    def names(self) -> list[str]:
        return [method.name for _, method, _ in self.sent]

    def take(self) -> list[base.Frame]:
        methods = [method for _, method, _ in self.sent]
        self.sent.clear()
        return methods


@dataclass
class Harness:
    broker: Broker
    machine: RecordingMachine
    ctx: ConnectionContext
    closed: list[int] = field(default_factory=list)

    def channel(self, number: int = 1) -> ChannelSession:
        return ChannelSession(self.ctx, number, self.closed.append)


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    broker = Broker.open(BrokerConfig(data_dir=str(tmp_path)))
    machine = RecordingMachine()
    ctx = ConnectionContext(broker, machine, Session("conn-1", "guest", "/"),  # type: ignore[arg-type]
                            notify_output=lambda: None,
                            after_read=lambda start: asyncio.get_running_loop().call_soon(
                                start),
                            congested=lambda: False,
                            flow=ConnectionFlow({IN_FLIGHT_UNIT: 1 << 20}))
    yield Harness(broker, machine, ctx)
    await broker.close()


def method(channel: ChannelSession, value: base.Frame) -> None:
    channel.handle(ChannelMethod(channel.number, value))


def publish(channel: ChannelSession, body: bytes, routing_key: str = "q", exchange: str = "",
            mandatory: bool = False) -> None:
    channel.handle(Publish(channel.number, commands.Basic.Publish(
        exchange=exchange, routing_key=routing_key, mandatory=mandatory), Properties(), body))


async def settle(rounds: int = 20) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0.005)


# -- the publish pipeline ------------------------------------------------------------------


class FakePublisher:
    """What the pipeline calls, `start_batch`, in terms of a test's `publish_batch`, and
    where it counts its confirms and returns."""

    def __init__(self) -> None:
        self.stats = MessageStats()

    def start_batch(self, vhost: str, messages: list[Message],
                    holds: list[asyncio.Future[None]] | None = None, publisher_id: str = "",
                    ) -> asyncio.Future[list[PublishResult]]:
        return asyncio.ensure_future(self.publish_batch(vhost, messages))

    async def publish_batch(self, _vhost: str, messages: list[Message]) -> list[PublishResult]:
        raise NotImplementedError


class ScriptedPublisher(FakePublisher):
    def __init__(self, results: list[PublishResult]) -> None:
        super().__init__()
        self.results = results

    async def publish_batch(self, _vhost: str, messages: list[Message]) -> list[PublishResult]:
        return [self.results.pop(0) for _ in messages]


async def test_confirms_are_coalesced_into_runs_and_returns_come_first(
    harness: Harness,
) -> None:
    results = [PublishResult(True, True), PublishResult(True, True), PublishResult(True, False),
               PublishResult(False, True), PublishResult(True, True)]
    publisher = ScriptedPublisher(results)
    harness.broker.publisher = publisher  # type: ignore[assignment]
    pipeline = PublishPipeline(harness.ctx, 1)
    pipeline.confirming = True
    for i in range(5):
        pipeline.submit(Message("", "q", f"m{i}".encode()), mandatory=True)
    await settle()
    frames = harness.machine.take()
    assert [(f.name, getattr(f, "delivery_tag", None), getattr(f, "multiple", None))
            for f in frames] == [
        ("Basic.Return", None, None),  # m3 was unroutable: its return precedes every ack
        ("Basic.Ack", 2, True),
        ("Basic.Nack", 3, False),
        ("Basic.Ack", 5, True),
    ]
    # The overview's counts: four confirms (the nack is none), one return.
    assert (publisher.stats.confirm, publisher.stats.return_unroutable) == (4, 1)
    assert harness.ctx.flow.in_flight(IN_FLIGHT_UNIT) == 0


async def test_a_barrier_waits_for_the_publishes_before_it(harness: Harness) -> None:
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    class SlowPublisher(FakePublisher):
        async def publish_batch(self, _vhost: str, messages: list[Message]
                                ) -> list[PublishResult]:
            await gate
            return [PublishResult(True, m.body != b"no") for m in messages]

    harness.broker.publisher = SlowPublisher()  # type: ignore[assignment]
    pipeline = PublishPipeline(harness.ctx, 1)
    reached: list[int] = []
    pipeline.submit(Message("", "q", b"x"), mandatory=False)
    pipeline.barrier(lambda all_confirmed: reached.append(int(all_confirmed)))
    await settle(3)
    assert reached == [] and pipeline.pending == 2
    gate.set_result(None)
    await settle(3)
    assert reached == [1] and pipeline.pending == 0
    # A barrier tells whether every publish since the previous one was confirmed.
    pipeline.submit(Message("", "q", b"no"), mandatory=False)
    pipeline.barrier(lambda all_confirmed: reached.append(int(all_confirmed)))
    pipeline.submit(Message("", "q", b"yes"), mandatory=False)
    pipeline.barrier(lambda all_confirmed: reached.append(int(all_confirmed)))
    await settle(3)
    assert reached == [1, 0, 1]


@pytest.mark.parametrize("refusal", [
    GateFenced("the leadership of queue 'q' moved to n2 (epoch 4)"),
    NotEnoughReplicas("only 1 of the 2 in-sync replicas"),
])
async def test_a_refused_confirm_is_nacked_and_logged_without_a_traceback(
    harness: Harness, caplog: pytest.LogCaptureFixture, refusal: Exception,
) -> None:
    # A fenced leader (or too few in-sync replicas) refusing a confirm is an expected
    # outcome, answered with a nack: not "ERROR publish failed" with a traceback.
    class RefusingPublisher(FakePublisher):
        async def publish_batch(self, _vhost: str, messages: list[Message]
                                ) -> list[PublishResult]:
            raise refusal

    harness.broker.publisher = RefusingPublisher()  # type: ignore[assignment]
    pipeline = PublishPipeline(harness.ctx, 1)
    pipeline.confirming = True
    with caplog.at_level(logging.DEBUG, logger="api.amqp.publish_pipeline"):
        pipeline.submit(Message("", "q", b"x"), mandatory=False)
        await settle()
    [nack] = harness.machine.take()
    assert isinstance(nack, commands.Basic.Nack) and nack.delivery_tag == 1
    [record] = [r for r in caplog.records if r.name == "api.amqp.publish_pipeline"]
    assert record.levelno in (logging.INFO, logging.WARNING)
    assert record.exc_info is None and str(refusal) in record.getMessage()


async def test_an_unexpected_publish_failure_is_still_an_error(
    harness: Harness, caplog: pytest.LogCaptureFixture,
) -> None:
    class FailingPublisher(FakePublisher):
        async def publish_batch(self, _vhost: str, messages: list[Message]
                                ) -> list[PublishResult]:
            raise OSError("the queue's disk failed")

    harness.broker.publisher = FailingPublisher()  # type: ignore[assignment]
    pipeline = PublishPipeline(harness.ctx, 1)
    with caplog.at_level(logging.DEBUG, logger="api.amqp.publish_pipeline"):
        pipeline.submit(Message("", "q", b"x"), mandatory=False)
        await settle()
    [record] = [r for r in caplog.records if r.name == "api.amqp.publish_pipeline"]
    assert record.levelno == logging.ERROR and record.exc_info is not None


# -- the channel session ---------------------------------------------------------------------


async def test_own_publishes_are_visible_to_a_later_declare_and_get(harness: Harness) -> None:
    channel = harness.channel()
    method(channel, commands.Queue.Declare(queue="q"))
    for i in range(3):
        publish(channel, f"m{i}".encode())
    method(channel, commands.Queue.Declare(queue="q", passive=True))  # waits for the publishes
    method(channel, commands.Basic.Get(queue="q"))
    await settle()
    _declare_ok, declared_again, get_ok = harness.machine.take()
    assert isinstance(declared_again, commands.Queue.DeclareOk)
    assert declared_again.message_count == 3
    assert isinstance(get_ok, commands.Basic.GetOk)
    assert (get_ok.delivery_tag, get_ok.message_count) == (1, 2)


async def test_unknown_delivery_tag_closes_the_channel_with_406(harness: Harness) -> None:
    channel = harness.channel()
    method(channel, commands.Basic.Ack(delivery_tag=7))
    assert harness.machine.channel_closes == [
        (1, 406, "PRECONDITION_FAILED - unknown delivery tag 7", 60, 80)]
    assert channel.closed and harness.closed == [1]


async def test_reusing_a_consumer_tag_is_a_connection_error(harness: Harness) -> None:
    channel = harness.channel()
    method(channel, commands.Queue.Declare(queue="q"))
    method(channel, commands.Basic.Consume(queue="q", consumer_tag="c"))
    method(channel, commands.Basic.Consume(queue="q", consumer_tag="c"))
    await settle()
    assert harness.machine.connection_closes == [
        (530, "NOT_ALLOWED - attempt to reuse consumer tag 'c'", 60, 20)]


async def test_tx_commit_answers_after_its_publishes_and_rollback_restores_acks(
    harness: Harness,
) -> None:
    channel = harness.channel()
    method(channel, commands.Queue.Declare(queue="q"))
    method(channel, commands.Tx.Select())
    publish(channel, b"kept")
    method(channel, commands.Tx.Commit())
    method(channel, commands.Basic.Get(queue="q"))  # waits behind commit-ok
    await settle()
    names = harness.machine.names()
    assert names == ["Queue.DeclareOk", "Tx.SelectOk", "Tx.CommitOk", "Basic.GetOk"]
    harness.machine.take()
    method(channel, commands.Basic.Ack(delivery_tag=1))
    method(channel, commands.Tx.Rollback())
    method(channel, commands.Basic.Ack(delivery_tag=1))  # known again after the rollback
    method(channel, commands.Tx.Commit())
    method(channel, commands.Confirm.Select())
    await settle()
    assert harness.machine.names() == ["Tx.RollbackOk", "Tx.CommitOk"]
    assert harness.machine.channel_closes[0][1:3] == (
        406, "PRECONDITION_FAILED - cannot switch from tx to confirm mode")
    shell = harness.broker.queue("/", "q")
    assert shell is not None and shell.core.unacked_count == 0


def ack_in_a_transaction(channel: ChannelSession) -> None:
    """Queue q gets one message, which the channel fetches and acks inside a transaction."""
    method(channel, commands.Queue.Declare(queue="q", durable=True))
    publish(channel, b"m")
    method(channel, commands.Basic.Get(queue="q"))
    method(channel, commands.Tx.Select())
    method(channel, commands.Basic.Ack(delivery_tag=1))


async def test_tx_commit_waits_for_its_acks_on_disk(harness: Harness) -> None:
    channel = harness.channel()
    ack_in_a_transaction(channel)
    await settle()
    shell = harness.broker.queue("/", "q")
    assert shell is not None and shell.cursor.ack_floor == 0  # held by the transaction
    harness.machine.take()
    method(channel, commands.Tx.Commit())
    while "Tx.CommitOk" not in harness.machine.names():
        await asyncio.sleep(0)
    assert shell.cursor.ack_floor == 1  # written (and synced) before commit-ok


async def test_a_tx_commit_cut_short_by_a_closed_channel_leaves_no_unretrieved_error(
    harness: Harness, caplog: pytest.LogCaptureFixture,
) -> None:
    channel = harness.channel()
    ack_in_a_transaction(channel)
    await settle()
    shell = harness.broker.queue("/", "q")
    assert shell is not None

    async def fenced() -> None:
        raise OSError("the queue's disk failed")

    shell.settles_durable = fenced  # type: ignore[method-assign]
    publish(channel, b"in the tx")  # keeps the barrier waiting for the publish
    method(channel, commands.Tx.Commit())
    channel.close()  # the client went away: the pipeline is dropped with its barrier
    await settle()
    gc.collect()  # an unretrieved task exception is reported when the task is freed
    await settle()
    assert "exception was never retrieved" not in caplog.text


async def test_a_tx_with_a_refused_publish_fails_as_a_whole(harness: Harness) -> None:
    channel = harness.channel()
    method(channel, commands.Queue.Declare(queue="q", arguments={
        "x-max-length": 1, "x-overflow": "reject-publish"}))
    method(channel, commands.Tx.Select())
    publish(channel, b"fits")
    publish(channel, b"refused")
    method(channel, commands.Tx.Commit())
    await settle()
    assert "Tx.CommitOk" not in harness.machine.names()
    assert harness.machine.channel_closes == [
        (1, 406, "PRECONDITION_FAILED - partial tx completion", 90, 20)]
    assert harness.closed == [1]


async def test_global_prefetch_limits_deliveries_across_queues(harness: Harness) -> None:
    channel = harness.channel()
    for queue in ("a", "b"):
        method(channel, commands.Queue.Declare(queue=queue))
        for i in range(3):
            publish(channel, f"{queue}{i}".encode(), routing_key=queue)
    method(channel, commands.Basic.Qos(prefetch_count=2, global_=True))
    method(channel, commands.Basic.Consume(queue="a", consumer_tag="ca"))
    method(channel, commands.Basic.Consume(queue="b", consumer_tag="cb"))
    await settle()
    delivered = [m for m in harness.machine.take() if isinstance(m, commands.Basic.Deliver)]
    assert [d.delivery_tag for d in delivered] == [1, 2]
    assert channel.credit() == 0
    method(channel, commands.Basic.Ack(delivery_tag=2, multiple=True))
    await settle()
    delivered = [m for m in harness.machine.take() if isinstance(m, commands.Basic.Deliver)]
    assert [d.delivery_tag for d in delivered] == [3, 4]


async def test_closing_the_channel_requeues_and_a_deleted_queue_cancels_consumers(
    harness: Harness,
) -> None:
    first = harness.channel(1)
    method(first, commands.Queue.Declare(queue="q"))
    publish(first, b"m")
    method(first, commands.Basic.Consume(queue="q", consumer_tag="c1"))
    await settle()
    assert any(isinstance(m, commands.Basic.Deliver) for m in harness.machine.take())
    first.close()
    second = harness.channel(2)
    method(second, commands.Basic.Consume(queue="q", consumer_tag="c2"))
    await settle()
    (_consume_ok, redelivery) = harness.machine.take()
    assert isinstance(redelivery, commands.Basic.Deliver) and redelivery.redelivered
    third = harness.channel(3)
    method(third, commands.Queue.Delete(queue="q"))
    method(third, commands.Queue.Delete(queue="q"))  # idempotent
    await settle()
    sent: list[tuple[int, Any]] = [(ch, m.name) for ch, m, _ in harness.machine.sent]
    assert sent == [(2, "Basic.Cancel"), (3, "Queue.DeleteOk"), (3, "Queue.DeleteOk")]


async def test_reject_publish_counts_publishes_still_being_written(harness: Harness) -> None:
    """Broker fix: admissions in one batch used to all see the same ready count."""
    channel = harness.channel()
    method(channel, commands.Queue.Declare(queue="q", arguments={
        "x-max-length": 3, "x-overflow": "reject-publish"}))
    method(channel, commands.Confirm.Select())
    for i in range(10):
        publish(channel, f"m{i}".encode())
    await settle()
    outcome: list[str] = []  # per delivery tag, expanding multiple acks / nacks
    for frame in harness.machine.take():
        if isinstance(frame, commands.Basic.Ack | commands.Basic.Nack):
            first = len(outcome) + 1 if frame.multiple else frame.delivery_tag
            outcome.extend(frame.name for _ in range(first, frame.delivery_tag + 1))
    assert outcome == ["Basic.Ack"] * 3 + ["Basic.Nack"] * 7
    shell = harness.broker.queue("/", "q")
    assert shell is not None and shell.core.message_count == 3


async def test_an_unused_queue_expires(harness: Harness) -> None:
    """Broker fix: a queue nobody consumed from never armed its x-expires timer."""
    channel = harness.channel()
    method(channel, commands.Queue.Declare(queue="brief", arguments={"x-expires": 50}))
    await asyncio.sleep(0.2)
    assert harness.broker.queue("/", "brief") is None


async def test_publishes_of_one_loop_iteration_go_to_the_broker_as_one_batch(
    harness: Harness,
) -> None:
    class CountingPublisher(FakePublisher):
        def __init__(self) -> None:
            self.batches: list[list[bytes]] = []

        async def publish_batch(self, _vhost: str, messages: list[Message]
                                ) -> list[PublishResult]:
            self.batches.append([m.body for m in messages])
            return [PublishResult(True, True) for _ in messages]

    publisher = CountingPublisher()
    harness.broker.publisher = publisher  # type: ignore[assignment]
    pipeline = PublishPipeline(harness.ctx, 1)
    pipeline.confirming = True
    for i in range(300):
        pipeline.submit(Message("", "q", str(i).encode()), mandatory=False)
    await settle()
    pipeline.submit(Message("", "q", b"later"), mandatory=False)
    await settle()
    # Capped at MAX_BATCH, in publish order; a later iteration starts a new batch.
    assert [len(batch) for batch in publisher.batches] == [256, 44, 1]
    assert [b for batch in publisher.batches for b in batch][:3] == [b"0", b"1", b"2"]
    frames = harness.machine.take()
    assert frames[-1].name == "Basic.Ack" and frames[-1].delivery_tag == 301
    assert pipeline.pending == 0


async def _consume_three(harness: Harness) -> ChannelSession:
    channel = harness.channel()
    method(channel, commands.Queue.Declare(queue="q"))
    for i in range(3):
        publish(channel, f"m{i}".encode())
    method(channel, commands.Basic.Consume(queue="q", consumer_tag="c"))
    await settle()
    delivered = [m for m in harness.machine.take() if isinstance(m, commands.Basic.Deliver)]
    assert [d.delivery_tag for d in delivered] == [1, 2, 3]
    return channel


async def test_the_acks_of_one_read_are_settled_on_the_queue_together(
    harness: Harness,
) -> None:
    channel = await _consume_three(harness)
    shell = harness.broker.queue("/", "q")
    assert shell is not None
    calls: list[list[int]] = []
    real_ack = shell.ack
    shell.ack = lambda offsets: (calls.append(list(offsets)), real_ack(offsets))[1]  # type: ignore[method-assign]
    for tag in (1, 2, 3):  # one read: no loop iteration between them
        method(channel, commands.Basic.Ack(delivery_tag=tag))
    assert calls == []  # gathered until the read is handled
    await settle()
    assert calls == [[0, 1, 2]]
    assert (shell.core.message_count, shell.core.unacked_count) == (0, 0)


async def test_a_run_of_acks_settles_each_and_stops_at_an_unknown_tag(
    harness: Harness,
) -> None:
    channel = await _consume_three(harness)
    shell = harness.broker.queue("/", "q")
    assert shell is not None
    # Tag 9 was never issued: 406 at that ack. The ack before it counts; the one after
    # it is not taken, so the close requeues that message with the unacked third.
    channel.handle(Acks(1, [(1, False), (9, False), (2, False)]))
    assert harness.machine.channel_closes == [
        (1, 406, "PRECONDITION_FAILED - unknown delivery tag 9", 60, 80)]
    await settle()
    assert (shell.core.message_count, shell.core.unacked_count) == (2, 0)


async def test_an_ack_before_a_recover_or_a_close_is_settled_first(harness: Harness) -> None:
    channel = await _consume_three(harness)
    method(channel, commands.Basic.Ack(delivery_tag=1))
    method(channel, commands.Basic.Recover(requeue=True))  # same read: sees the ack
    await settle()
    redelivered = [m for m in harness.machine.take() if isinstance(m, commands.Basic.Deliver)]
    assert [(d.delivery_tag, d.redelivered) for d in redelivered] == [(4, True), (5, True)]
    method(channel, commands.Basic.Ack(delivery_tag=5))
    channel.close()  # in the same read as the ack: what was acked is not requeued
    other = harness.channel(2)
    method(other, commands.Basic.Consume(queue="q", consumer_tag="c2"))
    await settle()
    again = [(m.delivery_tag, m.redelivered, body) for _, m, body in harness.machine.sent
             if isinstance(m, commands.Basic.Deliver)]
    assert again == [(1, True, b"m1")]
