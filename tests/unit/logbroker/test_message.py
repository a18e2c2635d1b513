"""A message and its form in a queue log: every field survives the round trip."""

from pamqp import commands

from logbroker.message import Message, encode_properties, stored_fields
from segments.record_batch import LogRecord

Properties = commands.Basic.Properties


def test_record_round_trip_keeps_every_field() -> None:
    properties = Properties(message_id="m-1", delivery_mode=2, headers={"h": 1})
    message = Message("amq.topic", "a.b", b"body", properties, timestamp_ms=123)
    back = Message.from_record(message.to_record())
    assert (back.exchange, back.routing_key, back.body, back.timestamp_ms) == (
        "amq.topic", "a.b", b"body", 123)
    assert back.encoded_properties() == encode_properties(properties)
    assert back.properties.message_id == "m-1"
    assert back.persistent


def test_a_record_without_some_headers_reads_as_empty_fields() -> None:
    record = LogRecord(7, 5, None, b"v", (("k", b"key"), ("p", None)))
    assert stored_fields(record) == (b"", b"key", b"")
    message = Message.from_record(record)
    assert (message.exchange, message.routing_key, message.body) == ("", "key", b"v")
    assert message.properties.delivery_mode is None
    assert message.headers == {}


def test_stored_is_the_constructor_with_encoded_properties() -> None:
    raw = encode_properties(Properties(priority=3))
    fast = Message.stored("ex", "rk", b"b", 9, raw)
    slow = Message("ex", "rk", b"b", timestamp_ms=9, _encoded_properties=raw)
    for name in Message.__slots__:
        assert getattr(fast, name) == getattr(slow, name), name
    assert fast.properties.priority == 3
