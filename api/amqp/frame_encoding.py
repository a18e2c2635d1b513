"""Outgoing AMQP 0-9-1 frames: methods, and content (a method with its header and
body frames), encoded without pamqp's ``validate`` (see :mod:`api.amqp.wire`).

Methods the broker sends are built with :func:`build_method`, not their pamqp
constructors: those run ``validate``, whose name patterns refuse queue and exchange
names RabbitMQ accepts (any UTF-8 up to 255 bytes: ``ünïcode``, ``q#*``,
``federation: x -> node@host``), so a declare-ok, get-ok, deliver or return
carrying such a name would fail after the broker had done the work.

basic.deliver, one per message a consumer gets, has its own encoder: its
arguments around the delivery tag are cached per consumer tag, exchange and
routing key, and a delivery whose body fits one frame is built in one join.
"""

from __future__ import annotations

import inspect
import struct
from typing import TypeVar

from pamqp import base, commands, encode, header

from api.amqp.wire import (
    CONTENT_PREFIX,
    FRAME_BODY,
    FRAME_END_BYTES,
    FRAME_HEADER,
    FRAME_METHOD,
    FRAME_OVERHEAD,
    FRAME_PREFIX,
    METHOD_IDS,
    method_name,
)

__all__ = [
    "build_method",
    "content_frames",
    "deliver_arguments",
    "encode_content",
    "encode_delivery",
    "encode_method",
]


M = TypeVar("M", bound=base.Frame)


_ARGUMENTS: dict[type[base.Frame], dict[str, object]] = {}


def _arguments_and_defaults(cls: type[base.Frame]) -> dict[str, object]:
    """The arguments of `cls`'s constructor and their defaults (`empty` if required)."""
    arguments = _ARGUMENTS.get(cls)
    if arguments is None:
        parameters = inspect.signature(cls.__init__).parameters
        arguments = _ARGUMENTS[cls] = {
            name: parameter.default for name, parameter in parameters.items() if name != "self"}
    return arguments


def build_method(cls: type[M], **fields: object) -> M:
    """``cls(**fields)`` without pamqp's ``validate()``: the constructor's defaults,
    no checks; the encoder still refuses what cannot be encoded (a name over 255
    bytes, say). Arguments by name, so a call reads like the method's definition."""
    arguments = _arguments_and_defaults(cls)
    unknown = fields.keys() - arguments.keys()
    if unknown:
        raise TypeError(f"{cls.name} has no argument {sorted(unknown)[0]!r}")
    method = cls.__new__(cls)
    for name, default in arguments.items():
        value = fields.get(name, default)
        if value is inspect.Parameter.empty:
            raise TypeError(f"{cls.name} needs argument {name!r}")
        setattr(method, name, value)
    return method


def _frame(frame_type: int, channel: int, payload: bytes) -> bytes:
    return FRAME_PREFIX.pack(frame_type, channel, len(payload)) + payload + FRAME_END_BYTES


def _encode_arguments(method: base.Frame) -> bytes:
    """pamqp's ``Frame.marshal`` without ``validate()``: same bit packing."""
    out: list[bytes] = []
    bits = 0
    nbits = 0
    for attribute in method.__slots__:
        data_type = method.amqp_type(attribute)
        value = getattr(method, attribute, None)
        if data_type == "bit":
            if nbits == 8:
                out.append(bytes([bits]))
                bits = nbits = 0
            bits |= (1 if value else 0) << nbits
            nbits += 1
            continue
        if nbits:
            out.append(bytes([bits]))
            bits = nbits = 0
        out.append(encode.by_type(value, data_type))
    if nbits:
        out.append(bytes([bits]))
    return b"".join(out)


_DELIVERY_TAG = struct.Struct(">Q")
# basic.deliver's arguments around the delivery tag, by (consumer tag, exchange, key):
# a consumer's deliveries mostly share them.
_DELIVER_ENDS: dict[tuple[str, str, str], tuple[bytes, bytes]] = {}
_DELIVER_ENDS_MAX = 4096


def _deliver_ends(consumer_tag: object, exchange: object, routing_key: object
                  ) -> tuple[bytes, bytes] | None:
    """basic.deliver's arguments before and after the delivery tag and redelivered flag,
    cached; None when a field is unusual (the generic encoder says what is wrong)."""
    if not (isinstance(consumer_tag, str) and isinstance(exchange, str)
            and isinstance(routing_key, str)):
        return None
    key = (consumer_tag, exchange, routing_key)
    ends = _DELIVER_ENDS.get(key)
    if ends is None:
        encoded_tag, encoded_exchange = consumer_tag.encode(), exchange.encode()
        encoded_key = routing_key.encode()
        if max(len(encoded_tag), len(encoded_exchange), len(encoded_key)) > 255:
            return None
        if len(_DELIVER_ENDS) >= _DELIVER_ENDS_MAX:
            _DELIVER_ENDS.clear()
        ends = _DELIVER_ENDS[key] = (
            bytes((len(encoded_tag),)) + encoded_tag,
            bytes((len(encoded_exchange),)) + encoded_exchange
            + bytes((len(encoded_key),)) + encoded_key)
    return ends


def deliver_arguments(consumer_tag: object, delivery_tag: object, redelivered: bool,
                      exchange: object, routing_key: object) -> bytes | None:
    """basic.deliver's arguments, as `_encode_arguments` would write them (about 8x
    faster: one per delivery); None when a field is unusual, for the generic path."""
    ends = _deliver_ends(consumer_tag, exchange, routing_key)
    if ends is None or not (isinstance(delivery_tag, int) and 0 <= delivery_tag < 1 << 63):
        return None
    return b"".join((ends[0], _DELIVERY_TAG.pack(delivery_tag),
                     b"\x01" if redelivered else b"\x00", ends[1]))


def encode_method(channel: int, method: base.Frame) -> bytes:
    """One method frame. Raises ValueError if an argument cannot be encoded."""
    try:
        arguments = None
        if type(method) is commands.Basic.Deliver:
            arguments = deliver_arguments(method.consumer_tag, method.delivery_tag,
                                          bool(method.redelivered), method.exchange,
                                          method.routing_key)
        if arguments is None:
            arguments = _encode_arguments(method)
    except (TypeError, ValueError, struct.error) as err:
        raise ValueError(f"cannot encode {method_name(method)}: {err}") from err
    return _frame(FRAME_METHOD, channel, METHOD_IDS.pack(*_split_index(method.index)) + arguments)


def encode_content(
    channel: int,
    method: base.Frame,
    properties: commands.Basic.Properties | bytes,
    body: bytes,
    frame_max: int,
) -> bytes:
    """Method frame, content header frame and body frames of at most frame_max - 8 bytes.

    An empty body has no body frame, as in RabbitMQ.
    """
    return encode_method(channel, method) + content_frames(channel, properties, body,
                                                           frame_max)


_DELIVER_IDS = METHOD_IDS.pack(commands.Basic.frame_id, commands.Basic.Deliver.frame_id)


def encode_delivery(channel: int, consumer_tag: str, delivery_tag: int, redelivered: bool,
                    exchange: str, routing_key: str, properties: bytes, body: bytes,
                    frame_max: int) -> bytes | None:
    """`encode_content` of a basic.deliver without building pamqp's object (one per
    delivery); None when a field is unusual (use `encode_content`)."""
    size = len(body)
    ends = _deliver_ends(consumer_tag, exchange, routing_key)
    if (ends is not None and 0 < size <= (frame_max - FRAME_OVERHEAD if frame_max else size)
            and 0 <= delivery_tag < 1 << 63):
        # The usual delivery: the three frames in one join (a third faster than below).
        return b"".join((
            FRAME_PREFIX.pack(FRAME_METHOD, channel,
                               len(_DELIVER_IDS) + len(ends[0]) + 9 + len(ends[1])),
            _DELIVER_IDS, ends[0], _DELIVERY_TAG.pack(delivery_tag),
            b"\x01" if redelivered else b"\x00", ends[1], FRAME_END_BYTES,
            FRAME_PREFIX.pack(FRAME_HEADER, channel, CONTENT_PREFIX.size + len(properties)),
            CONTENT_PREFIX.pack(commands.Basic.frame_id, 0, size), properties,
            FRAME_END_BYTES, FRAME_PREFIX.pack(FRAME_BODY, channel, size), body,
            FRAME_END_BYTES))
    arguments = deliver_arguments(consumer_tag, delivery_tag, redelivered, exchange,
                                  routing_key)
    if arguments is None:
        return None
    return (_frame(FRAME_METHOD, channel, _DELIVER_IDS + arguments)
            + content_frames(channel, properties, body, frame_max))


def content_frames(channel: int, properties: commands.Basic.Properties | bytes, body: bytes,
                   frame_max: int) -> bytes:
    """The content header frame and the body frames of a content method."""
    if isinstance(properties, bytes):  # already in wire form (flags + property list)
        head = CONTENT_PREFIX.pack(commands.Basic.frame_id, 0, len(body)) + properties
    else:
        try:
            head = header.ContentHeader(0, len(body), properties).marshal()
        except (TypeError, ValueError, struct.error) as err:
            raise ValueError(f"cannot encode the content properties: {err}") from err
    parts = [_frame(FRAME_HEADER, channel, head)]
    chunk = frame_max - FRAME_OVERHEAD if frame_max else len(body) or 1
    if len(body) <= chunk:  # the usual case: one body frame, no copy of the body
        if body:
            parts += (FRAME_PREFIX.pack(FRAME_BODY, channel, len(body)), body,
                      FRAME_END_BYTES)
        return b"".join(parts)
    view = memoryview(body)
    for offset in range(0, len(body), chunk):
        piece = view[offset : offset + chunk]
        parts.append(FRAME_PREFIX.pack(FRAME_BODY, channel, len(piece)))
        parts.append(bytes(piece))
        parts.append(FRAME_END_BYTES)
    return b"".join(parts)


def _split_index(index: int) -> tuple[int, int]:
    return (index >> 16) & 0xFFFF, index & 0xFFFF
