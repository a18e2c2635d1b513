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
from dataclasses import dataclass, field, replace
from typing import Any

from pamqp import commands

from segments.record_batch import Headers, LogRecord, Record

Properties = commands.Basic.Properties
PERSISTENT = 2
_FLAGS = struct.Struct(">H")


def encode_properties(properties: Properties) -> bytes:
    return bytes(properties.marshal())


def decode_properties(data: bytes) -> Properties:
    properties = Properties()
    if data:
        (flags,) = _FLAGS.unpack_from(data)
        properties.unmarshal(flags, data[_FLAGS.size :])
    return properties


@dataclass(slots=True)
class Message:
    exchange: str
    routing_key: str
    body: bytes
    properties: Properties = field(default_factory=Properties)
    timestamp_ms: int = 0  # when the broker accepted it
    # The encoded properties, kept so an unchanged message is not re-encoded.
    _encoded_properties: bytes | None = None

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
        return replace(self, properties=properties, _encoded_properties=None, **changes)

    def to_record(self) -> Record:
        headers: Headers = (
            ("e", self.exchange.encode()),
            ("k", self.routing_key.encode()),
            ("p", self.encoded_properties()),
        )
        return Record(self.body, self.timestamp_ms, None, headers)

    @classmethod
    def from_record(cls, record: LogRecord | Record) -> Message:
        fields = {name: value or b"" for name, value in record.headers}
        encoded = fields.get("p", b"")
        return cls(
            exchange=fields.get("e", b"").decode(),
            routing_key=fields.get("k", b"").decode(),
            body=record.value,
            properties=decode_properties(encoded),
            timestamp_ms=record.timestamp_ms,
            _encoded_properties=encoded,
        )

    @property
    def size_bytes(self) -> int:
        """What counts against x-max-length-bytes: the body, as RabbitMQ counts it."""
        return len(self.body)


def expiry_ms(message: Message, queue_ttl_ms: int | None, now_ms: int) -> int | None:
    """When the message expires in a queue: the earlier of the queue's and its own TTL."""
    deadlines = []
    if queue_ttl_ms is not None:
        deadlines.append(now_ms + queue_ttl_ms)
    expiration = message.properties.expiration
    if expiration is not None and expiration != "":
        # A malformed expiration is refused at publish time; a stored one never is.
        with contextlib.suppress(ValueError):
            deadlines.append(now_ms + max(0, int(expiration)))
    return min(deadlines) if deadlines else None


def valid_expiration(expiration: str | None) -> bool:
    """RabbitMQ accepts a non-negative integer number of milliseconds, as a string."""
    return expiration is None or (expiration.isdigit() and int(expiration) < 2**63)
