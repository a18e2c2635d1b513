"""AMQP 0-9-1 framing on top of pamqp: split a byte buffer into frames, decode
method and content-header payloads (the encoders are in
:mod:`api.amqp.frame_encoding`).

Theory of operation
-------------------
A frame is ``type:u8 channel:u16 size:u32 payload[size] 0xCE``. :func:`parse_frame`
looks at the 7-byte header first, so a frame larger than the negotiated limit is
refused before its payload is buffered; it returns ``None`` until the whole
frame is there. Payloads are decoded with pamqp, but every failure pamqp can
raise (``UnmarshalingException``, ``struct.error``, ``ValueError``, ``OverflowError``
from absurd timestamps, ``RecursionError`` from deeply nested tables, ...) is
turned into a :class:`ProtocolError` carrying the AMQP reply code, so callers
only ever see that one exception type for bad input.

Invariants
----------
* Nothing here keeps state (the socket buffers are :mod:`api.amqp.frame_buffers`);
  every function is pure.
* Methods are decoded without running pamqp's ``__init__`` / ``validate`` (which
  warn or reject values RabbitMQ accepts) and encoded without ``validate`` for
  the same reason: exchange and queue names may hold any UTF-8, as in RabbitMQ.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import cast

from pamqp import base, commands, common, decode, header

from api.amqp.reply_texts import reply_text
from logbroker.metadata.reply_codes import ReplyCode

__all__ = [
    "CONTENT_PREFIX",
    "FRAME_BODY",
    "FRAME_END",
    "FRAME_HEADER",
    "FRAME_HEARTBEAT",
    "FRAME_METHOD",
    "FRAME_OVERHEAD",
    "FRAME_PREFIX",
    "HEARTBEAT_FRAME",
    "METHOD_IDS",
    "PROTOCOL_HEADER",
    "ContentHeaderPrefix",
    "ProtocolError",
    "RawFrame",
    "check_frame",
    "decode_content_header",
    "decode_method",
    "method_ids",
    "method_name",
    "parse_frame",
]

FRAME_METHOD = 1
FRAME_HEADER = 2
FRAME_BODY = 3
FRAME_HEARTBEAT = 8
FRAME_END = 0xCE
FRAME_END_BYTES = b"\xce"
#: type (1) + channel (2) + size (4) + frame-end (1)
FRAME_OVERHEAD = 8
PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
HEARTBEAT_FRAME = struct.pack(">BHI", FRAME_HEARTBEAT, 0, 0) + FRAME_END_BYTES

FRAME_PREFIX = struct.Struct(">BHI")  # type, channel, payload size
METHOD_IDS = struct.Struct(">HH")  # class id, method id
CONTENT_PREFIX = struct.Struct(">HHQ")  # a content header: class id, weight, body size
_TICKET = struct.Struct(">H")  # as pamqp decodes a short
_PUBLISH_ID = (commands.Basic.frame_id << 16) | commands.Basic.Publish.frame_id
_ACK_ARGUMENTS = struct.Struct(">qB")  # delivery-tag (signed, as pamqp reads it), the bits
# A whole basic.ack frame: type, channel, size, class, method, delivery-tag, bits, frame-end.
ACK_FRAME = struct.Struct(">BHIHHqBB")
ACK_FRAME_SIZE = ACK_FRAME.size  # 21
ACK_PAYLOAD_SIZE = ACK_FRAME_SIZE - FRAME_PREFIX.size - 1


class ProtocolError(Exception):
    """Bad input from the peer, with the reply code and text to close with.

    ``lost_sync``: the byte stream can no longer be split into frames (bad size
    or frame-end), so nothing after this point can be read.
    """

    def __init__(
        self,
        code: int,
        explanation: str,
        class_id: int = 0,
        method_id: int = 0,
        *,
        lost_sync: bool = False,
    ) -> None:
        self.code = code
        self.text = reply_text(code, explanation)
        self.class_id = class_id
        self.method_id = method_id
        self.lost_sync = lost_sync
        super().__init__(self.text)


@dataclass(slots=True)  # not frozen: three of these per message, and frozen ones cost 3x
class RawFrame:
    """One complete frame, payload not yet decoded."""

    frame_type: int
    channel: int
    payload: bytes


def parse_frame(
    buf: bytes | bytearray, start: int, max_payload: int
) -> tuple[RawFrame, int] | None:
    """Take the frame starting at ``buf[start]``: ``(frame, end offset)``, or None if incomplete.

    ``max_payload`` 0 means no limit. Raises :class:`ProtocolError` (lost sync)
    for an oversized frame or a wrong frame-end octet.
    """
    if len(buf) - start < FRAME_PREFIX.size:
        return None
    frame_type, channel, size = FRAME_PREFIX.unpack_from(buf, start)
    if max_payload and size > max_payload:
        raise ProtocolError(
            ReplyCode.FRAME_ERROR,
            f"frame of type {frame_type} on channel {channel} has a payload of {size} bytes, "
            f"larger than the negotiated frame_max allows ({max_payload})",
            lost_sync=True,
        )
    end = start + FRAME_PREFIX.size + size + 1
    if len(buf) < end:
        return None
    if buf[end - 1] != FRAME_END:
        raise ProtocolError(
            ReplyCode.FRAME_ERROR,
            f"frame of type {frame_type} on channel {channel} ends with octet "
            f"0x{buf[end - 1]:02x} instead of the frame-end marker 0xce",
            lost_sync=True,
        )
    payload = bytes(buf[start + FRAME_PREFIX.size : end - 1])
    return RawFrame(frame_type, channel, payload), end


def check_frame(frame: RawFrame) -> None:
    """Raise :class:`ProtocolError` for a frame no channel may receive: a heartbeat
    with a payload or off channel 0, an unknown frame type, content on channel 0."""
    kind, channel, size = frame.frame_type, frame.channel, len(frame.payload)
    if kind == FRAME_HEARTBEAT:
        if size:
            raise ProtocolError(ReplyCode.FRAME_ERROR, f"heartbeat frame with {size} bytes")
        if channel != 0:
            raise ProtocolError(
                ReplyCode.UNEXPECTED_FRAME, f"heartbeat frame on channel {channel}, not 0"
            )
    elif kind not in (FRAME_METHOD, FRAME_HEADER, FRAME_BODY):
        raise ProtocolError(ReplyCode.FRAME_ERROR, f"unknown frame type {kind}")
    elif channel == 0 and kind != FRAME_METHOD:
        raise ProtocolError(ReplyCode.UNEXPECTED_FRAME, f"content frame (type {kind}) on channel 0")


def method_ids(payload: bytes) -> tuple[int, int]:
    """Class and method id of a method-frame payload (0, 0 if too short)."""
    if len(payload) < METHOD_IDS.size:
        return 0, 0
    class_id, method_id = METHOD_IDS.unpack_from(payload)
    return int(class_id), int(method_id)


def method_name(method: base.Frame | type[base.Frame]) -> str:
    """RabbitMQ's spelling of a method: ``Basic.CancelOk`` -> ``basic.cancel_ok``."""
    cls_name, _, meth = method.name.partition(".")
    snake = "".join("_" + c.lower() if c.isupper() else c for c in meth).lstrip("_")
    return f"{cls_name.lower()}.{snake}"


_ACK_IDS = METHOD_IDS.pack(commands.Basic.frame_id, commands.Basic.Ack.frame_id)


def ack_arguments(payload: bytes) -> tuple[int, bool] | None:
    """(delivery tag, multiple) if `payload` is a basic.ack's, else None.

    One per delivery from a consumer with manual acks: pamqp's generic decoder
    costs 5x as much. Same fields; anything shorter goes the generic way.
    """
    if len(payload) < 4 + _ACK_ARGUMENTS.size or payload[:4] != _ACK_IDS:
        return None
    delivery_tag, bits = _ACK_ARGUMENTS.unpack_from(payload, 4)
    return delivery_tag, bits & 1 != 0


def decode_method(payload: bytes) -> base.Frame:
    """Decode a method-frame payload into its pamqp command object."""
    if len(payload) < METHOD_IDS.size:
        raise ProtocolError(
            ReplyCode.FRAME_ERROR, f"method frame too short ({len(payload)} bytes) for a method id"
        )
    class_id, method_id = method_ids(payload)
    if (class_id << 16) | method_id == _PUBLISH_ID:
        publish = _decode_publish(payload)
        if publish is not None:
            return publish
    elif (fields := ack_arguments(payload)) is not None:
        ack = commands.Basic.Ack.__new__(commands.Basic.Ack)
        ack.delivery_tag, ack.multiple = fields
        return ack
    cls = cast("type[base.Frame] | None", commands.INDEX_MAPPING.get((class_id << 16) | method_id))
    if cls is None:
        raise ProtocolError(
            ReplyCode.COMMAND_INVALID,
            f"unknown method: class {class_id}, method {method_id}",
            class_id,
            method_id,
        )
    method = cls.__new__(cls)
    try:
        method.unmarshal(payload[METHOD_IDS.size :])
    except Exception as err:  # pamqp's decoders raise many kinds on garbage
        raise ProtocolError(
            ReplyCode.FRAME_ERROR,
            f"cannot decode the arguments of {method_name(cls)}: {_describe(err)}",
            class_id,
            method_id,
        ) from err
    return method


def _decode_publish(payload: bytes) -> commands.Basic.Publish | None:
    """basic.publish, the one method on the hot path, decoded as pamqp's generic
    `unmarshal` would (about 5x faster); None when the arguments are anything but
    well formed, so pamqp decodes them (and words the error) as for any method."""
    try:
        (ticket,) = _TICKET.unpack_from(payload, 4)
        exchange_end = 7 + payload[6]
        routing_key_end = exchange_end + 1 + payload[exchange_end]
        bits = payload[routing_key_end]
        exchange = payload[7:exchange_end].decode("utf-8")
        routing_key = payload[exchange_end + 1 : routing_key_end].decode("utf-8")
    except (struct.error, IndexError, UnicodeDecodeError):
        return None
    method = commands.Basic.Publish.__new__(commands.Basic.Publish)
    method.ticket = ticket
    method.exchange = exchange
    method.routing_key = routing_key
    method.mandatory = bits & 1 != 0
    method.immediate = bits & 2 != 0
    return method


@dataclass(slots=True)  # one per message: not frozen, which would cost 3x to build
class ContentHeaderPrefix:
    """The fixed part of a content header: class id, weight, body size."""

    class_id: int
    weight: int
    body_size: int


def decode_content_header(payload: bytes) -> ContentHeaderPrefix:
    """The fixed 12-byte prefix of a content-header payload (properties not decoded)."""
    if len(payload) < CONTENT_PREFIX.size + 2:
        raise ProtocolError(
            ReplyCode.FRAME_ERROR,
            f"content header frame too short ({len(payload)} bytes)",
        )
    class_id, weight, body_size = CONTENT_PREFIX.unpack_from(payload)
    return ContentHeaderPrefix(int(class_id), int(weight), int(body_size))


# Publishers tend to send the same properties again and again (often just
# delivery-mode): decoded ones without headers (so holding only immutable values)
# are kept by their wire bytes and handed out as copies, at a third of the cost.
_PROPERTIES_SEEN: dict[bytes, commands.Basic.Properties] = {}
_PROPERTIES_SEEN_MAX = 256
_PROPERTY_NAMES: tuple[str, ...] = tuple(commands.Basic.Properties.__slots__)


def decode_properties(payload: bytes) -> commands.Basic.Properties:
    """The basic properties of a content-header payload (class 60)."""
    wire_bytes = payload[CONTENT_PREFIX.size :]
    seen = _PROPERTIES_SEEN.get(wire_bytes)
    if seen is not None:
        return _copy_properties(seen)
    properties = _decode_properties(payload)
    if properties.headers is None:
        if len(_PROPERTIES_SEEN) >= _PROPERTIES_SEEN_MAX:
            _PROPERTIES_SEEN.clear()
        _PROPERTIES_SEEN[wire_bytes] = _copy_properties(properties)
    return properties


def _copy_properties(source: commands.Basic.Properties) -> commands.Basic.Properties:
    copied = commands.Basic.Properties.__new__(commands.Basic.Properties)
    for name in _PROPERTY_NAMES:
        setattr(copied, name, getattr(source, name))
    return copied


def _decode_properties(payload: bytes) -> commands.Basic.Properties:
    content_header = header.ContentHeader()
    try:
        content_header.unmarshal(payload)
    except Exception as err:  # pamqp's decoders raise many kinds on garbage
        raise ProtocolError(
            ReplyCode.FRAME_ERROR,
            f"cannot decode the content header properties: {_describe(err)}",
            commands.Basic.frame_id,
            commands.Basic.Publish.frame_id,
        ) from err
    return content_header.properties


def decode_table_body(data: bytes) -> common.FieldTable:
    """Decode a field table given without its 4-byte length prefix (AMQPLAIN)."""
    _, table = decode.field_table(struct.pack(">I", len(data)) + data)
    return table


def _describe(err: BaseException) -> str:
    text = str(err) or type(err).__name__
    return text if len(text) <= 120 else text[:117] + "..."
