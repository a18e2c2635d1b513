"""A message as it crosses the cluster link: the same fields a queue log keeps.

    exchange_len u16 | exchange | key_len u16 | key | props_len u32 | props |
    timestamp_ms u64 | body

The properties stay in their AMQP encoding, so a forwarded message is never
decoded on the way (the leader node stores the bytes it got).
"""

from __future__ import annotations

import struct

from logbroker.message import Message

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


def encode_message(message: Message) -> bytes:
    exchange = message.exchange.encode()
    key = message.routing_key.encode()
    properties = message.encoded_properties()
    return b"".join((_U16.pack(len(exchange)), exchange, _U16.pack(len(key)), key,
                     _U32.pack(len(properties)), properties, _U64.pack(message.timestamp_ms),
                     message.body))


def decode_message(data: bytes) -> Message:
    try:
        (length,) = _U16.unpack_from(data, 0)
        position = 2
        exchange = data[position:position + length].decode()
        position += length
        (length,) = _U16.unpack_from(data, position)
        position += 2
        key = data[position:position + length].decode()
        position += length
        (length,) = _U32.unpack_from(data, position)
        position += 4
        properties = data[position:position + length]
        position += length
        (timestamp_ms,) = _U64.unpack_from(data, position)
        position += 8
    except (struct.error, UnicodeDecodeError) as error:
        raise ValueError(f"malformed forwarded message: {error}") from error
    return Message(exchange, key, data[position:], timestamp_ms=timestamp_ms,
                   _encoded_properties=properties)
