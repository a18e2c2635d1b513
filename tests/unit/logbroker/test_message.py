"""A message and its form in a queue log: every field survives the round trip."""

from pamqp import commands

from logbroker.message import (
    Message,
    encode_properties,
    expirations_and_priorities,
    records_of,
    stored_fields,
)
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


def test_expiration_and_priority_agree_with_the_decoded_properties() -> None:
    for properties in (Properties(), Properties(delivery_mode=2), Properties(priority=7),
                       Properties(expiration="250", content_type="text/plain",
                                  headers={"h": "v"}, reply_to="r"),
                       Properties(priority=0, expiration="0", correlation_id="c")):
        raw = encode_properties(properties)
        encoded = Message.stored("", "q", b"", 0, raw)
        assert encoded.expiration_and_priority() == (properties.expiration,
                                                     properties.priority)
        decoded = Message("", "q", b"", properties)
        assert decoded.expiration_and_priority() == (properties.expiration,
                                                      properties.priority)
    assert Message.stored("", "q", b"", 0, b"").expiration_and_priority() == (None, None)


def test_plain_encoded_properties_are_not_decoded_for_the_queue() -> None:
    message = Message.stored("", "q", b"", 0, encode_properties(Properties(delivery_mode=2)))
    assert message.expiration_and_priority() == (None, None)
    assert message._properties is None


def _mixed_batch() -> list[Message]:
    """Runs of messages sharing one template's objects (`with_body`), equal but separate
    objects, and messages that differ in each of the shared parts."""
    template = Message("ex", "rk", b"t", Properties(priority=4, expiration="60"),
                       _encoded_properties=encode_properties(Properties(priority=4,
                                                                        expiration="60")))
    other = Message.stored("ex", "rk", b"o", 5, encode_properties(Properties(priority=1)))
    elsewhere, rerouted = template.with_body(b"x"), template.with_body(b"y")
    elsewhere.exchange, rerouted.routing_key = "ex3", "rk3"  # the same properties objects
    return [template, elsewhere, rerouted, template.with_body(b"a"), template.with_body(b"b"),
            Message("ex", "rk", b"c", Properties(priority=4, expiration="60")),
            other, template.with_body(b"d"), Message("ex2", "rk", b"e", template.properties),
            Message("ex", "rk2", b"f", template.properties), other,
            Message.stored("ex", "rk", b"g", 6, b""), template.with_body(b"h"),
            # still encoded, so neither has decoded properties to compare
            Message.stored("ex", "rk", b"p", 7, encode_properties(Properties(delivery_mode=2))),
            Message.stored("ex", "rk", b"q", 8, encode_properties(Properties(priority=2)))]


def test_records_of_a_batch_are_each_message_as_a_record() -> None:
    batch = _mixed_batch()
    assert records_of(batch) == [message.to_record() for message in batch]


def test_expirations_and_priorities_of_a_batch_are_each_message_s() -> None:
    batch = _mixed_batch()
    assert expirations_and_priorities(batch) == [
        message.expiration_and_priority() for message in batch]
    assert expirations_and_priorities(batch)[:3] == [("60", 4)] * 3
