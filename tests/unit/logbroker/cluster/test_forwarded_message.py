"""A message as it crosses the cluster link: every field survives, bad bytes are refused."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pamqp import commands

from logbroker.cluster.forwarded_message import decode_message, encode_message, encode_record
from logbroker.message import Message, encode_properties

Properties = commands.Basic.Properties


def _rich_properties() -> Properties:
    return Properties(
        content_type="application/json", content_encoding="gzip",
        headers={"x-tenant": "acme", "n": 7, "nested": {"flag": True}, "list": [1, "two"]},
        delivery_mode=2, priority=5, correlation_id="corr-1", reply_to="amq.rabbitmq.reply-to",
        expiration="60000", message_id="m-42", timestamp=None, message_type="order.created",
        user_id="guest", app_id="tests")


def _same(decoded: Message, original: Message) -> None:
    assert decoded.exchange == original.exchange
    assert decoded.routing_key == original.routing_key
    assert decoded.body == original.body
    assert decoded.timestamp_ms == original.timestamp_ms
    assert decoded.encoded_properties() == original.encoded_properties()


@pytest.mark.parametrize("message", [
    Message("", "", b""),
    Message("amq.topic", "kern.error.disk", b"payload", _rich_properties(),
            timestamp_ms=1_717_171_717_171),
    Message("ëxchange-ü", "ключ", b"\x00\xff" * 1000, Properties(delivery_mode=1),
            timestamp_ms=2**64 - 1),
    Message("e" * 255, "k" * 255, b"x" * (1 << 20), Properties(headers={"h": "v" * 500})),
], ids=["empty", "rich-properties", "unicode", "large"])
def test_round_trip(message: Message) -> None:
    decoded = decode_message(encode_message(message))
    _same(decoded, message)


def test_properties_travel_as_their_amqp_bytes_and_decode_to_the_same_values() -> None:
    properties = _rich_properties()
    original = Message("ex", "key", b"body", properties, timestamp_ms=5)
    decoded = decode_message(encode_message(original))
    # Carried as pamqp's encoding, not re-encoded on the way...
    assert decoded.encoded_properties() == encode_properties(properties)
    # ...and they read back as the same values.
    got = decoded.properties
    for name in ("content_type", "content_encoding", "headers", "delivery_mode", "priority",
                 "correlation_id", "reply_to", "expiration", "message_id", "message_type",
                 "user_id", "app_id"):
        assert getattr(got, name) == getattr(properties, name), name
    assert decoded.persistent


def test_message_with_stored_encoded_properties_is_forwarded_as_is() -> None:
    # A message read from a queue log keeps its property bytes undecoded.
    raw = encode_properties(Properties(message_id="abc", delivery_mode=2))
    stored = Message("x", "y", b"z", timestamp_ms=9, _encoded_properties=raw)
    decoded = decode_message(encode_message(stored))
    assert decoded.encoded_properties() == raw
    assert decoded.properties.message_id == "abc"


def test_default_properties_round_trip() -> None:
    decoded = decode_message(encode_message(Message("", "q", b"b")))
    assert decoded.properties.delivery_mode is None
    assert decoded.headers == {}


def test_layout_is_as_documented() -> None:
    message = Message("ex", "rk", b"BODY", Properties(priority=1), timestamp_ms=0x0102030405)
    data = encode_message(message)
    props = message.encoded_properties()
    expected = (struct.pack(">HHIQ", 2, 2, len(props), 0x0102030405) + b"ex" + b"rk"
                + props + b"BODY")
    assert data == expected


@given(exchange=st.text(max_size=30), key=st.text(max_size=30), body=st.binary(max_size=500),
       timestamp=st.integers(min_value=0, max_value=2**64 - 1),
       priority=st.one_of(st.none(), st.integers(min_value=0, max_value=9)),
       message_id=st.one_of(st.none(), st.text(min_size=1, max_size=20)))
@settings(max_examples=200, deadline=None)
def test_round_trip_property(exchange: str, key: str, body: bytes, timestamp: int,
                             priority: int | None, message_id: str | None) -> None:
    message = Message(exchange, key, body, Properties(priority=priority, message_id=message_id),
                      timestamp_ms=timestamp)
    decoded = decode_message(encode_message(message))
    _same(decoded, message)
    assert decoded.properties.priority == priority
    assert decoded.properties.message_id == message_id


def test_a_stored_record_is_forwarded_as_its_message_would_be() -> None:
    message = Message("amq.topic", "kern.error", b"body", _rich_properties(),
                      timestamp_ms=77)
    record = message.to_record()
    assert encode_record(record) == encode_message(message)
    assert encode_record(record) == encode_message(Message.from_record(record))


def test_every_truncation_before_the_body_is_a_value_error() -> None:
    message = Message("exchange-é", "routing.key", b"the body", _rich_properties(),
                      timestamp_ms=123)
    data = encode_message(message)
    fixed_part = len(data) - len(message.body)  # the body has no length: it is the rest
    for length in range(fixed_part):
        with pytest.raises(ValueError, match="malformed forwarded message"):
            decode_message(data[:length])
    assert decode_message(data[:fixed_part]).body == b""


@pytest.mark.parametrize("data", [
    struct.pack(">HHIQ", 2, 0, 0, 0) + b"\xff\xfe",  # exchange is not UTF-8
    struct.pack(">HHIQ", 0, 1, 0, 0) + b"\x80",  # key is not UTF-8
    struct.pack(">HHIQ", 0, 0, 2**32 - 1, 0),  # properties run past the end
    struct.pack(">HHIQ", 60000, 0, 0, 0) + b"short",
    struct.pack(">HH", 0, 0),  # the fixed fields are cut short
], ids=["exchange-utf8", "key-utf8", "long-properties", "long-exchange", "short-fixed"])
def test_malformed_input_is_a_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_message(data)
