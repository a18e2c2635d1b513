"""The listener's own I/O: heartbeats on a real socket, big messages, many publishes."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import pika
from pamqp import commands, exceptions, frame, header, heartbeat

from logbroker.queue.publisher_flow import FlowLimits, PublisherFlow
from logbroker.resource_alarms import Watermarks
from tests.integration.amqp.conftest import BrokerThread
from tests.integration.amqp.helpers import consume_n, pump_until, wait_for_count

Connect = Callable[[], pika.BlockingConnection]


class RawClient:
    """Just enough of an AMQP client to open a connection and watch what the server sends."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buffer = b""

    def send(self, value: frame.FrameTypes, channel: int = 0) -> None:
        self.sock.sendall(frame.marshal(value, channel))

    def receive(self) -> frame.FrameTypes | None:
        """The next frame, or None when the server closed the socket."""
        while True:
            if self.buffer:
                try:
                    consumed, _channel, value = frame.unmarshal(self.buffer)
                except exceptions.UnmarshalingException:  # incomplete: read more
                    pass
                else:
                    self.buffer = self.buffer[consumed:]
                    return value
            data = self.sock.recv(65536)
            if not data:
                return None
            self.buffer += data

    def open(self, heartbeat_s: int) -> None:
        self.sock.sendall(bytes(header.ProtocolHeader().marshal()))
        assert isinstance(self.receive(), commands.Connection.Start)
        self.send(commands.Connection.StartOk(
            client_properties={}, mechanism="PLAIN", response="\0guest\0guest"))
        assert isinstance(self.receive(), commands.Connection.Tune)
        self.send(commands.Connection.TuneOk(0, 131072, heartbeat_s))
        self.send(commands.Connection.Open("/"))
        assert isinstance(self.receive(), commands.Connection.OpenOk)


def test_heartbeats_are_sent_and_a_silent_client_is_dropped(amqp_broker: int) -> None:
    client = RawClient(amqp_broker)
    client.open(heartbeat_s=1)
    started = time.monotonic()
    first = client.receive()  # the server's heartbeat, within half an interval or so
    assert isinstance(first, heartbeat.Heartbeat)
    assert time.monotonic() - started < 1.5
    while client.receive() is not None:  # we never answer: dropped after 2 intervals
        assert time.monotonic() - started < 4.0
    assert time.monotonic() - started >= 1.0
    client.sock.close()


def test_large_messages_span_many_frames(connect: Connect) -> None:
    channel = connect().channel()
    channel.confirm_delivery()
    channel.queue_declare("large")
    body = bytes(range(256)) * 4096  # 1 MiB, eight frames at frame_max 131072
    channel.basic_publish("", "large", body)
    ((_method, _props, received),) = consume_n(channel, "large", 1)
    assert received == body


def test_many_pipelined_publishes_keep_order_and_a_backlog_drains(connect: Connect) -> None:
    channel = connect().channel()
    channel.queue_declare("many")
    count = 2000
    for i in range(count):
        channel.basic_publish("", "many", str(i).encode())
    assert wait_for_count(channel, "many", count) == count
    got = consume_n(channel, "many", count)  # no prefetch: delivered in flow batches
    assert [int(body) for _, _, body in got] == list(range(count))


def test_a_consumer_that_does_not_read_gets_no_more_than_the_socket_holds(
    connect: Connect, amqp_broker: int,
) -> None:
    channel = connect().channel()
    channel.queue_declare("backlog")
    body = b"x" * 100_000
    for _ in range(200):  # 20 MB, far more than socket buffers hold
        channel.basic_publish("", "backlog", body)
    assert wait_for_count(channel, "backlog", 200) == 200
    stalled = RawClient(amqp_broker)
    stalled.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    stalled.open(heartbeat_s=0)
    stalled.send(commands.Channel.Open(), 1)
    stalled.send(commands.Basic.Consume(queue="backlog"), 1)  # no prefetch, never reads
    time.sleep(0.5)
    ready = channel.queue_declare("backlog", passive=True).method.message_count
    assert 0 < ready < 200  # delivering stopped once the socket backed up
    stalled.sock.close()
    assert wait_for_count(channel, "backlog", 200) == 200  # its deliveries came back


def test_resource_alarm_blocks_publishers_until_it_clears(
    connect: Connect, broker_thread: BrokerThread,
) -> None:
    connection = connect()
    channel = connection.channel()
    channel.queue_declare("alarmed")
    channel.basic_publish("", "alarmed", b"before")
    channel.queue_declare("alarmed", passive=True)  # the publish has been read
    events: list[str] = []
    connection.add_on_connection_blocked_callback(lambda _c, m: events.append(m.method.reason))
    connection.add_on_connection_unblocked_callback(lambda _c, _m: events.append("unblocked"))
    monitor = broker_thread.broker.resources

    def alarm(memory_high: int | None) -> None:
        monitor.alarms.watermarks = Watermarks(memory_high, disk_free_limit_bytes=0)
        monitor.sample()

    broker_thread.call(lambda: alarm(1))  # any process is over 1 byte of RSS
    pump_until([connection], lambda: events == ["low on memory"])
    for i in range(5):  # sent one by one; the server stops reading after the first
        channel.basic_publish("", "alarmed", f"during {i}".encode())
        connection.process_data_events(time_limit=0.05)
    observer = connect().channel()  # not a publisher: still served while the alarm lasts
    time.sleep(0.1)
    # Like RabbitMQ, the publish being read when the alarm came may still get through.
    assert observer.queue_declare("alarmed", passive=True).method.message_count <= 2
    broker_thread.call(lambda: alarm(None))
    pump_until([connection], lambda: events == ["low on memory", "unblocked"])
    assert wait_for_count(observer, "alarmed", 6) == 6


def test_a_queue_whose_consumer_falls_behind_stops_reading_its_publisher(
    connect: Connect, broker_thread: BrokerThread,
) -> None:
    publisher_connection = connect()
    publisher = publisher_connection.channel()
    publisher.queue_declare("flowing")
    broker = broker_thread.broker
    # Small limits, and no stall or maximum to end the hold: only the consumer can.
    limits = FlowLimits(high=3, low=1, open_min_ms=0, stall_ms=60_000, trial_hold_max_ms=60_000)
    broker_thread.call(lambda: setattr(broker.queue("/", "flowing").flow_gate, "flow",
                                       PublisherFlow(limits)))
    consumer_connection = connect()
    consumer = consumer_connection.channel()
    consumer.basic_qos(prefetch_count=1)
    delivered: list[bytes] = []
    consumer.basic_consume("flowing", lambda _c, _m, _p, body: delivered.append(body))
    for i in range(12):  # sent one by one: the server stops reading once it holds
        publisher.basic_publish("", "flowing", f"m{i}".encode())
        publisher_connection.process_data_events(time_limit=0.05)
    consumer_connection.process_data_events(time_limit=0.1)
    observer = connect().channel()
    assert observer.queue_declare("flowing", passive=True).method.message_count <= 6
    assert "flow" in [info.state for info in broker.connections.all()]
    assert delivered == [b"m0"]
    consumer_connection.close()  # no consumer left: the hold ends, m0 is requeued
    assert wait_for_count(observer, "flowing", 12) == 12
    assert "flow" not in [info.state for info in broker.connections.all()]
