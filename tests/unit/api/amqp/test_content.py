"""basic.publish assembly: header and body frames, limits, unexpected frames."""

from __future__ import annotations

import datetime

import pytest
from pamqp import body, commands, header

from api.amqp import (
    ChannelClosed,
    ChannelOpened,
    ConnectionConfig,
    ConnectionFailed,
    ConnectionState,
    Publish,
)
from tests.unit.api.amqp.client import Client, marshal, publish_frames, raw_frame


def open_client(**config: int) -> Client:
    client = Client(ConnectionConfig(**config)).handshake()
    client.open_channels([1, 2])
    return client


def only_publish(events: list[object]) -> Publish:
    [event] = events
    assert isinstance(event, Publish)
    return event


def test_publish_with_body_over_several_frames() -> None:
    client = open_client()
    payload = b"0123456789" * 1000
    props = commands.Basic.Properties(
        content_type="application/json",
        delivery_mode=2,
        headers={"x-retry": 3, "nested": {"a": [1, "two"]}},
        message_id="m-1",
        timestamp=datetime.datetime(2024, 5, 1, tzinfo=datetime.UTC),
    )
    data = publish_frames(1, payload, frame_size=3000, properties=props, exchange="ex")
    events = client.feed(data)
    event = only_publish(events)
    assert event.channel == 1
    assert (event.method.exchange, event.method.routing_key) == ("ex", "rk")
    assert event.properties == props
    assert event.body == payload
    assert client.output() == []  # publishes are silent


def test_publish_delivered_byte_by_byte() -> None:
    client = open_client()
    data = publish_frames(1, b"hello world", frame_size=4)
    events = []
    for i in range(len(data)):
        events += client.feed(data[i : i + 1])
        if i < len(data) - 1:
            assert events == []
    assert only_publish(events).body == b"hello world"


def test_zero_length_body_completes_at_the_header() -> None:
    client = open_client()
    event = only_publish(client.feed(publish_frames(1, b"")))
    assert event.body == b""


def test_empty_body_frames_are_allowed_in_between() -> None:
    client = open_client()
    data = (
        marshal(1, commands.Basic.Publish(routing_key="rk"))
        + marshal(1, header.ContentHeader(0, 3, commands.Basic.Properties()))
        + raw_frame(3, 1, b"")
        + raw_frame(3, 1, b"abc")
    )
    assert only_publish(client.feed(data)).body == b"abc"


def test_publishes_interleave_across_channels() -> None:
    client = open_client()
    a = publish_frames(1, b"AAAA", frame_size=2)
    b = publish_frames(2, b"BBBB", frame_size=2)
    # method, header, body, body for each: interleave frame by frame
    frames_a = split_frames(a)
    frames_b = split_frames(b)
    events = []
    for fa, fb in zip(frames_a, frames_b, strict=True):
        events += client.feed(fa + fb)
    assert [(e.channel, e.body) for e in events] == [(1, b"AAAA"), (2, b"BBBB")]


def split_frames(data: bytes) -> list[bytes]:
    out = []
    while data:
        size = int.from_bytes(data[3:7], "big")
        out.append(data[: 8 + size])
        data = data[8 + size :]
    return out


def test_oversized_message_closes_the_channel_with_406_and_skips_the_body() -> None:
    client = open_client(max_message_bytes=1000)
    data = publish_frames(1, b"x" * 5000, frame_size=1000)
    events = client.feed(data)
    text = "PRECONDITION_FAILED - message size 5000 is larger than configured max size 1000"
    assert events == [ChannelClosed(1, False, 406, text, 60, 40)]
    assert client.sent() == [
        (
            1,
            "Channel.Close",
            {"reply_code": 406, "reply_text": text, "class_id": 60, "method_id": 40},
        )
    ]
    assert client.machine.state is ConnectionState.OPEN
    assert client.machine.open_channels == frozenset({2})
    # the other channel keeps working; the refused channel reopens after close-ok
    assert only_publish(client.feed(publish_frames(2, b"ok"))).body == b"ok"
    assert client.send(1, commands.Channel.CloseOk()) == []
    assert client.send(1, commands.Channel.Open()) == [ChannelOpened(1)]


def test_oversized_message_body_is_not_buffered() -> None:
    client = open_client(max_message_bytes=10)
    client.feed(publish_frames(1, b"", declared_size=10**9))
    for _ in range(100):
        assert client.feed(raw_frame(3, 1, b"y" * 100_000)) == []
    assert client.machine.state is ConnectionState.OPEN


def test_exactly_max_message_bytes_is_accepted() -> None:
    client = open_client(max_message_bytes=100)
    assert only_publish(client.feed(publish_frames(1, b"z" * 100))).body == b"z" * 100


@pytest.mark.parametrize(
    ("data", "code", "text"),
    [
        (  # content header without a publish
            marshal(1, header.ContentHeader(0, 3, commands.Basic.Properties())),
            505,
            "UNEXPECTED_FRAME - expected method frame, got non method frame instead",
        ),
        (  # body frame without a publish
            marshal(1, body.ContentBody(b"abc")),
            505,
            "UNEXPECTED_FRAME - expected method frame, got non method frame instead",
        ),
        (  # body where the header should be
            marshal(1, commands.Basic.Publish()) + marshal(1, body.ContentBody(b"abc")),
            505,
            "UNEXPECTED_FRAME - expected content header for class 60, "
            "got non content header frame instead",
        ),
        (  # a method where the header should be
            marshal(1, commands.Basic.Publish()) + marshal(1, commands.Basic.Qos()),
            505,
            "UNEXPECTED_FRAME - expected content header for class 60, "
            "got non content header frame instead",
        ),
        (  # a method in the middle of the body
            marshal(1, commands.Basic.Publish())
            + marshal(1, header.ContentHeader(0, 10, commands.Basic.Properties()))
            + marshal(1, body.ContentBody(b"abc"))
            + marshal(1, commands.Channel.Close(200, "", 0, 0)),
            505,
            "UNEXPECTED_FRAME - expected content body, got non content body frame instead",
        ),
        (  # more body than declared
            marshal(1, commands.Basic.Publish())
            + marshal(1, header.ContentHeader(0, 2, commands.Basic.Properties()))
            + marshal(1, body.ContentBody(b"abc")),
            501,
            "FRAME_ERROR - content body frame exceeds remaining content size",
        ),
        (  # header of another class
            marshal(1, commands.Basic.Publish())
            + raw_frame(2, 1, b"\x00\x32\x00\x00" + b"\x00" * 7 + b"\x01\x00\x00"),
            505,
            "UNEXPECTED_FRAME - expected content header for class 60, got one for class 50",
        ),
        (  # non-zero weight
            marshal(1, commands.Basic.Publish())
            + raw_frame(2, 1, b"\x00\x3c\x00\x01" + b"\x00" * 7 + b"\x01\x00\x00"),
            505,
            "UNEXPECTED_FRAME - expected content header for class 60 with weight 0",
        ),
        (  # headers table longer than the frame
            marshal(1, commands.Basic.Publish())
            + raw_frame(2, 1, b"\x00\x3c\x00\x00" + b"\x00" * 7 + b"\x01\x20\x00\xff\xff\xff\xff"),
            501,
            "FRAME_ERROR - cannot decode the content header properties",
        ),
        (  # content frame on channel 0
            marshal(0, body.ContentBody(b"abc")),
            505,
            "UNEXPECTED_FRAME - content frame (type 3) on channel 0",
        ),
    ],
)
def test_content_protocol_errors(data: bytes, code: int, text: str) -> None:
    client = open_client()
    [failed] = client.feed(data)
    assert isinstance(failed, ConnectionFailed)
    assert failed.reply_code == code
    assert failed.reply_text.startswith(text)
    [(channel, close)] = client.methods()
    assert channel == 0 and isinstance(close, commands.Connection.Close)
    assert close.reply_code == code
    assert client.machine.state is ConnectionState.CLOSING
