"""A message as it crosses the cluster link: the same fields a queue log keeps.

    exchange_len u16 | key_len u16 | props_len u32 | timestamp_ms u64 |
    exchange | key | props | body

The fixed-size fields come first, so one unpack reads them all: a forwarded
consumer's node decodes one of these per delivery. The properties stay in
their AMQP encoding, so a forwarded message is never decoded on the way (the
leader node stores the bytes it got, and forwards the bytes it stored).
"""

from __future__ import annotations

import struct

from logbroker.message import Message, stored_fields
from segments.record_batch import LogRecord, Record

_FIXED = struct.Struct(">HHIQ")
_FIXED_SIZE = _FIXED.size


def encode_message(message: Message) -> bytes:
    exchange = message.exchange.encode()
    key = message.routing_key.encode()
    properties = message.encoded_properties()
    return b"".join((_FIXED.pack(len(exchange), len(key), len(properties),
                                 message.timestamp_ms),
                     exchange, key, properties, message.body))


def encode_record(record: LogRecord | Record) -> bytes:
    """`encode_message(Message.from_record(record))`, without the `Message`: the
    queue leader forwards a stored record as it is."""
    exchange, key, properties = stored_fields(record)
    return b"".join((_FIXED.pack(len(exchange), len(key), len(properties), record.timestamp_ms),
                     exchange, key, properties, record.value))


def decode_message(data: bytes) -> Message:
    try:
        exchange_length, key_length, properties_length, timestamp_ms = _FIXED.unpack_from(data)
        key_start = _FIXED_SIZE + exchange_length
        properties_start = key_start + key_length
        body_start = properties_start + properties_length
        if body_start > len(data):
            raise ValueError(f"{body_start} bytes of fields in {len(data)} bytes")
        return Message.stored(data[_FIXED_SIZE:key_start].decode(),
                              data[key_start:properties_start].decode(), data[body_start:],
                              timestamp_ms, data[properties_start:body_start])
    except (struct.error, ValueError) as error:  # UnicodeDecodeError is a ValueError
        raise ValueError(f"malformed forwarded message: {error}") from error
