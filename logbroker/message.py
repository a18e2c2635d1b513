"""A message as the broker keeps it, and its form in a queue's log.

A message is its body plus the AMQP basic properties and where it was
published (exchange, routing key). In a queue log it is one record:

    value   = body
    headers = (("e", exchange), ("k", routing key), ("p", encoded properties))

The properties are stored in AMQP 0-9-1 property-list encoding (pamqp's
`Basic.Properties.marshal`): exact for every field type a client can send,
compact, and the same bytes an AMQP delivery carries. The broker depends on
pamqp here only as a codec; REST and WebSocket see the properties as values.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Sequence
from typing import Any

from pamqp import commands

from segments.record_batch import Headers, LogRecord, Record

Properties = commands.Basic.Properties
PERSISTENT = 2
_FLAGS = struct.Struct(">H")
# Property flags of priority (bit 11) and expiration (bit 8), and the flag that says
# another flag word follows (bit 0).
_PRIORITY_EXPIRATION_OR_MORE = 0x0800 | 0x0100 | 0x0001


def encode_properties(properties: Properties) -> bytes:
    return bytes(properties.marshal())


def decode_properties(data: bytes) -> Properties:
    properties = Properties()
    if data:
        (flags,) = _FLAGS.unpack_from(data)
        properties.unmarshal(flags, data[_FLAGS.size :])
    return properties


class Message:
    """A message; its properties are decoded only when something reads them.

    A message read from a queue log and delivered over AMQP never needs its
    properties as values: the stored wire bytes go out as they are.
    """

    __slots__ = ("_encoded_properties", "_properties", "body", "exchange", "routing_key",
                 "timestamp_ms")

    def __init__(
        self,
        exchange: str,
        routing_key: str,
        body: bytes,
        properties: Properties | None = None,
        timestamp_ms: int = 0,
        _encoded_properties: bytes | None = None,
    ) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        self.body = body
        self.timestamp_ms = timestamp_ms  # when the broker accepted it
        if properties is None and _encoded_properties is None:
            properties = Properties()
        self._properties = properties
        # Kept so an unchanged message is not encoded again.
        self._encoded_properties = _encoded_properties

    @classmethod
    def stored(cls, exchange: str, routing_key: str, body: bytes, timestamp_ms: int,
               encoded_properties: bytes) -> Message:
        """A message as a log or the cluster link keeps it: properties still encoded.
        The same as the constructor, at a third of its cost (one per delivery)."""
        message = cls.__new__(cls)
        message.exchange = exchange
        message.routing_key = routing_key
        message.body = body
        message.timestamp_ms = timestamp_ms
        message._properties = None
        message._encoded_properties = encoded_properties
        return message

    def with_body(self, body: bytes) -> Message:
        """A message of the same exchange, routing key and properties (shared, so only
        for properties that hold immutable values) with `body` and no timestamp yet:
        what publishing the same fields with another payload makes, at half the cost
        of the constructor."""
        message = Message.__new__(Message)
        message.exchange = self.exchange
        message.routing_key = self.routing_key
        message.body = body
        message.timestamp_ms = 0
        message._properties = self._properties
        message._encoded_properties = self._encoded_properties
        return message

    @property
    def properties(self) -> Properties:
        if self._properties is None:
            self._properties = decode_properties(self._encoded_properties or b"")
        return self._properties

    def expiration_and_priority(self) -> tuple[str | None, int | None]:
        """The two properties a queue decides with. Properties still encoded (a message
        forwarded by another node) are not decoded when their flags say neither is
        there, the usual case: that decode cost as much as the rest of an enqueue."""
        encoded = self._encoded_properties
        if (self._properties is None and encoded is not None and len(encoded) >= 2
                and not _FLAGS.unpack_from(encoded)[0] & _PRIORITY_EXPIRATION_OR_MORE):
            return None, None
        properties = self.properties
        return properties.expiration, properties.priority

    @property
    def persistent(self) -> bool:
        return self.properties.delivery_mode == PERSISTENT

    @property
    def headers(self) -> dict[str, Any]:
        return dict(self.properties.headers or {})

    def encoded_properties(self) -> bytes:
        if self._encoded_properties is None:
            self._encoded_properties = encode_properties(self.properties)
        return self._encoded_properties

    def with_properties(self, properties: Properties, **changes: Any) -> Message:
        message = Message(self.exchange, self.routing_key, self.body, properties,
                          self.timestamp_ms)
        for name, value in changes.items():
            setattr(message, name, value)
        return message

    def to_record(self) -> Record:
        headers = _stored_headers(self.exchange, self.routing_key, self.encoded_properties())
        return Record(self.body, self.timestamp_ms, None, headers)

    @classmethod
    def from_record(cls, record: LogRecord | Record) -> Message:
        exchange, key, properties = stored_fields(record)
        return cls.stored(exchange.decode(), key.decode(), record.value, record.timestamp_ms,
                          properties)

    @property
    def size_bytes(self) -> int:
        """What counts against x-max-length-bytes: the body, as RabbitMQ counts it."""
        return len(self.body)


def records_of(messages: Sequence[Message]) -> list[Record]:
    """`Message.to_record` for a batch: messages that share exchange, routing key and
    properties (most of a batch) share one headers tuple, built once."""
    records: list[Record] = []
    seen: dict[tuple[str, str, bytes], Headers] = {}
    for message in messages:
        key = (message.exchange, message.routing_key, message.encoded_properties())
        headers = seen.get(key)
        if headers is None:
            headers = seen[key] = _stored_headers(*key)
        records.append(Record(message.body, message.timestamp_ms, None, headers))
    return records


def expirations_and_priorities(messages: Sequence[Message]
                               ) -> list[tuple[str | None, int | None]]:
    """`Message.expiration_and_priority` for a batch."""
    return [message.expiration_and_priority() for message in messages]


def _stored_headers(exchange: str, routing_key: str, encoded_properties: bytes) -> Headers:
    return (("e", exchange.encode()), ("k", routing_key.encode()), ("p", encoded_properties))


def stored_fields(record: LogRecord | Record) -> tuple[bytes, bytes, bytes]:
    """A stored message's exchange, routing key and encoded properties."""
    exchange = key = properties = b""
    for name, value in record.headers:
        if name == "e":
            exchange = value or b""
        elif name == "k":
            key = value or b""
        elif name == "p":
            properties = value or b""
    return exchange, key, properties


def expiry_ms(message: Message, queue_ttl_ms: int | None, now_ms: int) -> int | None:
    """When the message expires in a queue: the earlier of the queue's and its own TTL."""
    return expiry_from(message.expiration_and_priority()[0], queue_ttl_ms, now_ms)


def expiry_from(expiration: str | None, queue_ttl_ms: int | None, now_ms: int) -> int | None:
    """`expiry_ms` of a message whose expiration property is `expiration`."""
    deadlines = []
    if queue_ttl_ms is not None:
        deadlines.append(now_ms + queue_ttl_ms)
    if expiration is not None and expiration != "":
        # A malformed expiration is refused at publish time; a stored one never is.
        with contextlib.suppress(ValueError):
            deadlines.append(now_ms + max(0, int(expiration)))
    return min(deadlines) if deadlines else None


def valid_expiration(expiration: str | None) -> bool:
    """RabbitMQ accepts a non-negative integer number of milliseconds, as a string."""
    return expiration is None or (expiration.isdigit() and int(expiration) < 2**63)
