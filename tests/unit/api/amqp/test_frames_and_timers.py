"""Framing errors, garbage input, heartbeats, and the connection close handshake."""

from __future__ import annotations

import struct

import pytest
from pamqp import commands, heartbeat

from api.amqp import (
    ChannelMethod,
    ConnectionClosed,
    ConnectionConfig,
    ConnectionFailed,
    ConnectionState,
)
from logbroker.metadata.reply_codes import is_valid_reply_code
from tests.unit.api.amqp.client import Client, marshal, raw_frame


def open_client(now_ms: int = 0, **tune: int) -> Client:
    client = Client(now_ms=now_ms).handshake(**tune)
    client.open_channels([1])
    return client


def assert_closed_with(client: Client, code: int, events: list[object]) -> ConnectionFailed:
    failed = events[0]
    assert isinstance(failed, ConnectionFailed) and failed.sent_close
    assert failed.reply_code == code
    closes = [f for _, f in client.methods() if isinstance(f, commands.Connection.Close)]
    assert [c.reply_code for c in closes] == [code]
    return failed


def test_frame_larger_than_frame_max_is_refused_from_its_header() -> None:
    client = open_client(frame_max=8192)
    events = client.feed(struct.pack(">BHI", 1, 1, 8193))  # only the 7-byte header
    failed = assert_closed_with(client, 501, events)
    assert "larger than the negotiated frame_max allows (8192)" in failed.reply_text
    # the byte stream is lost: the machine is done at once
    assert events[1] == ConnectionClosed(False, 501, failed.reply_text)
    assert client.machine.closed


def test_frame_of_exactly_frame_max_payload_is_tolerated_like_rabbitmq() -> None:
    client = open_client(frame_max=4096)
    declare = marshal(1, commands.Queue.Declare(queue="q" * 100, arguments={"x": "y" * 3900}))
    assert len(declare) - 8 <= 4096
    [event] = client.feed(declare)
    assert isinstance(event, ChannelMethod)


def test_wrong_frame_end_octet() -> None:
    client = open_client()
    events = client.feed(raw_frame(1, 1, b"\x00\x3c\x00\x0a" + b"\x00" * 7, end=b"\x00"))
    failed = assert_closed_with(client, 501, events)
    assert "frame-end" in failed.reply_text
    assert client.machine.closed


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (raw_frame(4, 0, b"abc"), 501),  # unknown frame type
        (raw_frame(8, 0, b"abc"), 501),  # heartbeat with a payload
        (raw_frame(8, 1, b""), 505),  # heartbeat on a channel
        (raw_frame(1, 1, b"\x00"), 501),  # method frame too short for ids
        (raw_frame(1, 1, b"\x00\x99\x00\x01"), 503),  # unknown class
        (raw_frame(1, 1, b"\x00\x32\x00\x63"), 503),  # unknown method of queue
        (raw_frame(1, 1, b"\x00\x32\x00\x0a\x00"), 501),  # queue.declare, truncated args
        (marshal(0, commands.Basic.Qos()), 504),  # non-connection method on channel 0
        (marshal(0, commands.Connection.Blocked("x")), 503),  # server-only, wrong way
    ],
)
def test_bad_frames_close_the_connection(data: bytes, code: int) -> None:
    client = open_client()
    assert_closed_with(client, code, client.feed(data))
    assert client.machine.state is ConnectionState.CLOSING


def test_garbage_after_the_handshake_never_raises() -> None:
    client = open_client()
    events = client.feed(b"\x01\x02\x03 this is not AMQP at all \xff\xfe" * 10)
    failed = events[0]
    assert isinstance(failed, ConnectionFailed)
    assert is_valid_reply_code(failed.reply_code) and failed.reply_code >= 500


def test_a_method_split_into_single_bytes() -> None:
    client = open_client()
    data = marshal(1, commands.Queue.Bind(queue="q", exchange="x", routing_key="k"))
    for i in range(len(data) - 1):
        assert client.feed(data[i : i + 1]) == []
    [event] = client.feed(data[-1:])
    assert isinstance(event, ChannelMethod) and isinstance(event.method, commands.Queue.Bind)


def test_heartbeats_are_sent_when_idle_and_absence_is_detected() -> None:
    client = open_client(now_ms=1_000, heartbeat_s=10)
    machine = client.machine
    assert machine.next_deadline_ms() == 6_000  # half the interval after the last output
    machine.tick(5_999)
    assert machine.data_to_send() == b""
    machine.tick(6_000)
    assert machine.data_to_send() == heartbeat.Heartbeat.marshal()
    assert machine.next_deadline_ms() == 11_000
    # output resets the send timer
    client.now_ms = 9_000
    client.send(1, commands.Basic.Qos(prefetch_count=1))
    machine.send_method(1, commands.Basic.QosOk())
    machine.data_to_send()
    machine.tick(13_999)
    assert machine.data_to_send() == b""
    # a heartbeat from the client counts as liveness
    client.now_ms = 25_000
    assert client.feed(heartbeat.Heartbeat.marshal()) == []
    assert machine.next_deadline_ms() == 14_000
    machine.tick(44_999)
    assert not machine.closed
    machine.tick(45_000)  # two intervals of silence
    failed, closed = machine.next_events()
    assert failed == ConnectionFailed(0, "missed heartbeats from client, timeout: 10s", False)
    assert isinstance(closed, ConnectionClosed)
    assert machine.closed and machine.next_deadline_ms() is None


def test_heartbeat_monitor_paused_while_the_shell_does_not_read() -> None:
    client = open_client(now_ms=0, heartbeat_s=10)
    machine = client.machine
    machine.pause_heartbeat_monitor(True, 5_000)  # a blocked publisher is not read
    machine.tick(100_000)
    assert not machine.closed  # silence we caused is not a dead peer
    assert heartbeat.Heartbeat.marshal() in machine.data_to_send()  # ours still go out
    machine.pause_heartbeat_monitor(False, 100_000)
    machine.tick(119_999)
    assert not machine.closed  # the two-interval window starts afresh
    machine.tick(120_000)
    assert machine.closed


def test_heartbeat_disabled_by_the_client() -> None:
    client = open_client(heartbeat_s=0)
    assert client.machine.next_deadline_ms() is None
    client.machine.tick(10**9)
    assert client.machine.data_to_send() == b""
    assert not client.machine.closed


def test_server_close_waits_for_close_ok_and_ignores_the_rest() -> None:
    client = open_client(heartbeat_s=0)
    text = "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'"
    assert client.machine.close_connection(320, text)
    assert not client.machine.close_connection(320, text)
    assert client.sent() == [
        (
            0,
            "Connection.Close",
            {"reply_code": 320, "reply_text": text, "class_id": 0, "method_id": 0},
        )
    ]
    assert client.send(1, commands.Queue.Declare(queue="q"), commands.Basic.Qos()) == []
    assert client.feed(raw_frame(4, 0, b"junk")) == []
    assert client.output() == []
    assert not client.machine.send_method(1, commands.Basic.QosOk())
    assert client.send(0, commands.Connection.CloseOk()) == [ConnectionClosed(False, 320, text)]
    assert client.machine.closed


def test_simultaneous_close() -> None:
    client = open_client()
    client.machine.close_connection(320, "CONNECTION_FORCED - bye")
    client.output()
    events = client.send(0, commands.Connection.Close(200, "Normal shutdown", 0, 0))
    assert events == [ConnectionClosed(False, 320, "CONNECTION_FORCED - bye")]
    assert client.sent() == [(0, "Connection.CloseOk", {})]


def test_close_ok_never_comes() -> None:
    client = open_client(now_ms=0, heartbeat_s=0)
    client.machine.close_connection(320, "CONNECTION_FORCED - bye")
    assert client.machine.next_deadline_ms() == 30_000
    client.machine.tick(30_000)
    assert client.machine.next_events() == [ConnectionClosed(False, 320, "CONNECTION_FORCED - bye")]


def test_close_wait_follows_a_short_heartbeat_like_rabbitmq() -> None:
    client = open_client(now_ms=0, heartbeat_s=5)
    client.machine.close_connection(320, "CONNECTION_FORCED - bye")
    client.machine.tick(4_999)
    assert not client.machine.closed
    client.machine.tick(5_000)
    assert client.machine.closed


def test_lost_sync_while_closing_ends_at_once() -> None:
    client = open_client()
    client.machine.close_connection(320, "CONNECTION_FORCED - bye")
    client.output()
    events = client.feed(raw_frame(1, 0, b"\x00\x0a\x00\x33", end=b"X"))
    assert events == [ConnectionClosed(False, 320, "CONNECTION_FORCED - bye")]
    assert client.output() == []


def test_reply_text_is_cut_to_a_shortstr() -> None:
    client = open_client()
    assert client.machine.close_channel(1, 404, "NOT_FOUND - " + "é" * 300)
    [(_, close)] = client.methods()
    assert isinstance(close, commands.Channel.Close)
    assert len(close.reply_text.encode()) <= 255


def test_output_is_measured_for_back_pressure() -> None:
    client = open_client()
    deliver = commands.Basic.Deliver("c", 1, False, "", "rk")
    client.machine.send_content(1, deliver, commands.Basic.Properties(), b"x" * 1000)
    assert client.machine.pending_output_bytes > 1000
    client.machine.data_to_send()
    assert client.machine.pending_output_bytes == 0


def test_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        ConnectionConfig(frame_max=100)
    with pytest.raises(ValueError):
        ConnectionConfig(channel_max=70000)
