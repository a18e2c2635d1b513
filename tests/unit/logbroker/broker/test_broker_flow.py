"""The broker end to end, in process: definitions, publish, consume, ack, restart."""

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pamqp import commands

from logbroker.broker import Broker
from logbroker.broker_config import BrokerConfig, Session
from logbroker.errors import BrokerError
from logbroker.message import Message
from logbroker.metadata import DeclareQueue
from logbroker.queue.publisher_flow import FlowLimits, PublisherFlow
from logbroker.queue.queue_shell import QueueShell

SESSION = Session("conn-1", "guest", "/")


@dataclass
class RecordingSink:
    channel_key: str = "conn-1:1"
    deliveries: list[tuple[str, str | None, int, bool, Message]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    room: int | None = None

    def deliver(self, queue: str, consumer_tag: str | None, offset: int, redelivered: bool,
                message: Message) -> None:
        self.deliveries.append((queue, consumer_tag, offset, redelivered, message))

    def consumer_cancelled(self, queue: str, consumer_tag: str,
                           leader_moved: bool = False) -> None:
        self.cancelled.append(consumer_tag)

    def credit(self) -> int | None:
        return self.room


def persistent(body: bytes, routing_key: str = "", **props: object) -> Message:
    return Message("", routing_key, body, commands.Basic.Properties(delivery_mode=2, **props))


async def publish(broker: Broker, exchange: str, key: str, message: Message) -> bool:
    message.exchange, message.routing_key = exchange, key
    result = await broker.publisher.publish(SESSION.vhost, message)
    return result.routed and result.confirmed


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0.01)


async def test_publish_consume_ack_and_restart(tmp_path: Path) -> None:
    config = BrokerConfig(data_dir=str(tmp_path))
    broker = Broker.open(config)
    await broker.definitions.declare_queue(SESSION, "work", durable=True)
    for i in range(5):
        assert await publish(broker, "", "work", persistent(f"m{i}".encode()))
    assert (await broker.definitions.declare_queue(SESSION, "work", passive=True))[1] == 5
    sink = RecordingSink()
    await broker.consuming.consume(SESSION, "work", sink, consumer_tag="c1", prefetch_count=2)
    await settle()
    assert [d[4].body for d in sink.deliveries] == [b"m0", b"m1"]
    broker.queue("/", "work").ack([sink.deliveries[0][2]])
    await settle()
    assert [d[4].body for d in sink.deliveries] == [b"m0", b"m1", b"m2"]
    await broker.close()

    broker = Broker.open(config)  # m1 and m2 were delivered, not acked
    sink = RecordingSink()
    await broker.consuming.consume(SESSION, "work", sink, consumer_tag="c1")
    await settle()
    got = [(d[4].body, d[3]) for d in sink.deliveries]
    assert got == [(b"m1", True), (b"m2", True), (b"m3", False), (b"m4", False)]
    await broker.close()


async def test_topic_routing_dead_lettering_and_ttl(tmp_path: Path) -> None:
    broker = Broker.open(BrokerConfig(data_dir=str(tmp_path)))
    await broker.definitions.declare_exchange(SESSION, "logs", "topic")
    await broker.definitions.declare_exchange(SESSION, "dlx", "fanout")
    await broker.definitions.declare_queue(SESSION, "dead")
    await broker.definitions.bind_queue(SESSION, "dead", "dlx", "")
    await broker.definitions.declare_queue(SESSION, "errors", arguments={
        "x-dead-letter-exchange": "dlx", "x-message-ttl": 50})
    await broker.definitions.bind_queue(SESSION, "errors", "logs", "*.error")
    assert await publish(broker, "logs", "kern.error", persistent(b"disk"))
    assert not (await broker.publisher.publish("/", Message("logs", "kern.info", b"x"))).routed
    sink = RecordingSink()
    await broker.consuming.consume(SESSION, "dead", sink)
    for _ in range(50):
        await asyncio.sleep(0.02)
        if sink.deliveries:
            break
    (queue, _, _, _, message), = sink.deliveries
    death = message.properties.headers["x-death"][0]
    assert (queue, death["reason"], death["queue"], death["count"]) == (
        "dead", "expired", "errors", 1)
    assert message.properties.headers["x-first-death-reason"] == "expired"
    await broker.close()


async def test_reject_without_requeue_goes_to_dlx_and_errors_have_reply_codes(
    tmp_path: Path,
) -> None:
    broker = Broker.open(BrokerConfig(data_dir=str(tmp_path)))
    await broker.definitions.declare_queue(SESSION, "dlq")
    await broker.definitions.declare_queue(SESSION, "q", arguments={
        "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"})
    await publish(broker, "", "q", persistent(b"bad"))
    sink = RecordingSink()
    await broker.consuming.consume(SESSION, "q", sink)
    await settle()
    broker.queue("/", "q").reject([sink.deliveries[0][2]], requeue=False)
    await settle()
    found = await broker.consuming.get(SESSION, "dlq", "conn-1:2", no_ack=True)
    assert found is not None and found[2].properties.headers["x-death"][0]["reason"] == "rejected"
    with pytest.raises(BrokerError) as raised:
        await broker.definitions.declare_queue(SESSION, "q", durable=True)
    assert raised.value.reply_code == 406
    with pytest.raises(BrokerError) as raised:
        await broker.definitions.declare_queue(SESSION, "missing", passive=True)
    assert raised.value.reply_code == 404
    await broker.close()


async def test_settled_segments_are_deleted(tmp_path: Path) -> None:
    # No retention: settled segments go at once, as on RabbitMQ.
    broker = Broker.open(BrokerConfig(data_dir=str(tmp_path), retention_ms=0))
    await broker.definitions.declare_queue(SESSION, "big", durable=True)
    shell = broker.queue("/", "big")
    shell.log.config = type(shell.log.config)(segment_bytes_max=64 * 1024)
    body = b"x" * 4000
    for _ in range(100):
        await publish(broker, "", "big", persistent(body))
    assert shell.log.segment_count > 3
    for _ in range(100):
        found = await broker.consuming.get(SESSION, "big", "conn-1:1", no_ack=True)
        assert found is not None
    for _ in range(50):
        await asyncio.sleep(0.02)
        if shell.log.segment_count == 1:
            break
    assert shell.log.segment_count == 1
    assert shell.log.log_start_offset > 0
    await broker.close()


async def test_publish_order_is_queue_order_across_fanout_and_single_routes(
    tmp_path: Path,
) -> None:
    broker = Broker.open(BrokerConfig(data_dir=str(tmp_path)))
    await broker.definitions.declare_exchange(SESSION, "both", "fanout")
    for name in ("q1", "q2"):
        await broker.definitions.declare_queue(SESSION, name)
        await broker.definitions.bind_queue(SESSION, name, "both", "")
    # Started in this order, as a channel starts its publishes: a fanout to two
    # queues, then a publish to one of them. q1 must hold them in that order.
    first = asyncio.ensure_future(broker.publisher.publish("/", Message("both", "", b"1")))
    second = asyncio.ensure_future(broker.publisher.publish("/", Message("", "q1", b"2")))
    await asyncio.gather(first, second)
    bodies = []
    while (found := await broker.consuming.get(SESSION, "q1", "conn-1:1",
                                        no_ack=True)) is not None:
        bodies.append(found[2].body)
    assert bodies == [b"1", b"2"]
    await broker.close()


async def test_settled_segments_stay_for_replay_within_retention(tmp_path: Path) -> None:
    broker = Broker.open(BrokerConfig(data_dir=str(tmp_path)))
    await broker.definitions.declare_queue(SESSION, "kept", durable=True)
    await broker.definitions.declare_queue(SESSION, "capped", durable=True,
                              arguments={"x-retention-bytes": 100_000})
    body = b"x" * 4000
    for name in ("kept", "capped"):
        shell = broker.queue("/", name)
        shell.log.config = type(shell.log.config)(segment_bytes_max=64 * 1024)
        for _ in range(100):
            await publish(broker, "", name, persistent(body))
        for _ in range(100):
            assert await broker.consuming.get(SESSION, name, "conn-1:1", no_ack=True) is not None
    kept, capped = broker.queue("/", "kept"), broker.queue("/", "capped")
    for _ in range(50):
        await asyncio.sleep(0.02)
        if capped.log.log_start_offset > 0:
            break
    # Consumed and acked, yet the whole history reads back from offset 0.
    assert kept.log.log_start_offset == 0
    records = kept.read_log(0, 1 << 20)
    assert [r.offset for r in records] == list(range(100))
    # The capped queue keeps at most ~100 kB of settled segments (plus the active one).
    assert capped.log.log_start_offset > 0
    assert capped.log.size_bytes <= 100_000 + 2 * 64 * 1024
    assert capped.read_log(0, 1 << 20)[0].offset == capped.log.log_start_offset
    await broker.close()


async def test_a_batch_routes_each_exchange_and_key_once_unless_routing_reads_more(
        tmp_path: Path) -> None:
    broker = Broker.open(BrokerConfig(data_dir=str(tmp_path)))
    await broker.definitions.declare_queue(SESSION, "a", durable=True)
    await broker.definitions.declare_queue(SESSION, "b", durable=True)
    await broker.definitions.declare_exchange(SESSION, "hx", "headers")
    await broker.definitions.bind_queue(SESSION, "b", "hx", "",
                                 {"x-match": "any", "to": "b"})
    router = broker.router("/")
    calls: list[str] = []
    real_route = router.route
    router.route = lambda exchange, message: (  # type: ignore[method-assign]
        calls.append(exchange), real_route(exchange, message))[1]
    batch = [Message("", "a", b"1"), Message("", "a", b"2"),
             Message("hx", "", b"3", commands.Basic.Properties(headers={"to": "b"})),
             Message("hx", "", b"4", commands.Basic.Properties(headers={"to": "nobody"})),
             Message("", "a", b"5")]
    results = await broker.publisher.publish_batch("/", batch)
    assert [r.routed for r in results] == [True, True, True, False, True]
    assert calls == ["", "hx", "hx"]  # the default exchange once; headers per message
    assert (await broker.definitions.declare_queue(SESSION, "a", passive=True))[1] == 3
    await broker.close()


async def test_a_queue_whose_consumers_fall_behind_holds_its_publishers(tmp_path: Path) -> None:
    broker, busy = await _busy_queue(tmp_path, high=3)
    await broker.definitions.declare_queue(SESSION, "idle", durable=True)
    sink = RecordingSink(room=0)  # a consumer out of credit: everything stays ready
    await broker.consuming.consume(SESSION, "busy", sink, consumer_tag="c1")
    holds: list[asyncio.Future[None]] = []
    published = 0
    while not holds and published < 6:
        await broker.publisher.start_batch("/", [persistent(b"m", routing_key="busy"),
                                                 persistent(b"i", routing_key="idle")], holds)
        published += 1
    assert len(holds) == 1 and not holds[0].done()  # the busy queue's hold only
    assert published == 5  # the 4th publish made the backlog pass `high`: measured; 5th held
    # Forwarded and dead-lettered publishes are not held: only callers that pass `holds`.
    for _ in range(3):
        assert (await broker.publisher.publish_batch(
            "/", [persistent(b"x", routing_key="busy")]))[0].confirmed
    sink.room = None  # credit again: the consumer takes the backlog, the hold ends
    busy.schedule_pump()
    await asyncio.wait_for(holds[0], 1.0)
    assert len(sink.deliveries) == 8
    await broker.close()


async def _busy_queue(tmp_path: Path, high: int) -> tuple[Broker, QueueShell]:
    """A broker with queue "busy" whose consumer (channel conn-1:1) has no credit, and
    which holds its publishers past `high` ready messages until the consumer catches up."""
    broker = Broker.open(BrokerConfig(data_dir=str(tmp_path)))
    await broker.definitions.declare_queue(SESSION, "busy", durable=True)
    busy = broker.queue("/", "busy")
    assert busy is not None
    busy.flow_gate.flow = PublisherFlow(FlowLimits(high=high, low=min(high, 1), open_min_ms=0,
                                                   stall_ms=60_000, trial_hold_max_ms=60_000))
    return broker, busy


async def test_a_closing_queue_lets_its_held_publishers_go(tmp_path: Path) -> None:
    broker, _ = await _busy_queue(tmp_path, high=0)
    await broker.consuming.consume(SESSION, "busy", RecordingSink(room=0), consumer_tag="c1")
    holds: list[asyncio.Future[None]] = []
    while not holds:
        await broker.publisher.start_batch("/", [persistent(b"m", routing_key="busy")], holds)
    await broker.definitions.delete_queue(SESSION, "busy")
    await asyncio.wait_for(holds[0], 1.0)
    await broker.close()


async def test_a_queue_never_holds_a_connection_that_consumes_from_it(tmp_path: Path) -> None:
    broker, _ = await _busy_queue(tmp_path, high=0)
    # The consumer's channel key is "conn-1:1": connection conn-1 must not be held.
    await broker.consuming.consume(SESSION, "busy", RecordingSink(room=0), consumer_tag="c1")
    own: list[asyncio.Future[None]] = []
    other: list[asyncio.Future[None]] = []
    for _ in range(3):
        await broker.publisher.start_batch("/", [persistent(b"m", routing_key="busy")], own,
                                           publisher_id="conn-1")
        await broker.publisher.start_batch("/", [persistent(b"m", routing_key="busy")], other,
                                           publisher_id="conn-2")
    assert own == [] and other
    await broker.close()


async def test_a_queue_declared_again_while_its_old_instance_closes_opens_fresh(
    tmp_path: Path,
) -> None:
    broker = Broker.open(BrokerConfig(data_dir=str(tmp_path)))
    await broker.definitions.declare_queue(SESSION, "again", durable=True)
    assert await publish(broker, "", "again", persistent(b"old"))
    await broker.definitions.delete_queue(SESSION, "again")
    # A declare waits for the old instance's files (it held their lock: 541 before).
    assert await broker.definitions.declare_queue(SESSION, "again") == ("again", 0, 0)
    shell = broker.queue("/", "again")
    assert shell is not None and shell.directory == broker.queue_directory("/", "again")
    # Applied without that wait (as a Raft-committed declare is on another node): the
    # shell opens once the old one has closed.
    await broker.definitions.delete_queue(SESSION, "again")
    broker._apply(DeclareQueue("/", "again", durable=True, exclusive_owner=None,
                               auto_delete=False))
    await broker.settle()
    shell = broker.queue("/", "again")
    assert shell is not None and shell.core.message_count == 0
    assert await publish(broker, "", "again", persistent(b"new"))
    await broker.close()
