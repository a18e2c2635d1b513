"""Assembles basic.publish + content header + body frames into one message.

Theory of operation
-------------------
Per channel, the assembler is in one of three states, as in RabbitMQ's
``rabbit_command_assembler``::

    idle --publish--> awaiting header --header(size 0)--> idle (message complete)
                                      --header(size N)--> awaiting body --...N bytes--> idle

While it is not idle, the only acceptable frame on that channel is the next
content frame; anything else is a 505 UNEXPECTED_FRAME connection error with
RabbitMQ's texts ("expected content header for class 60, got non content header
frame instead"). A body frame that overshoots the declared size is a 501
FRAME_ERROR ("content body frame exceeds remaining content size").

Invariants
----------
* The declared body size is checked against ``max_message_bytes`` *before* any
  body byte is buffered (:class:`MessageTooLarge`), so memory per channel never
  exceeds ``max_message_bytes`` plus one frame.
* Body fragments are kept as a list and joined once, when the message is complete.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pamqp import commands

from api.amqp.wire import (
    FRAME_BODY,
    FRAME_HEADER,
    ProtocolError,
    decode_content_header,
    decode_properties,
)
from logbroker.metadata.reply_codes import ReplyCode

__all__ = ["AssembledMessage", "ContentAssembler", "MessageTooLarge"]

_BASIC = commands.Basic.frame_id
_PUBLISH = commands.Basic.Publish.frame_id
_CONTENT_HEADER_PREFIX = 12  # class id, weight, body size; then the property flags and list


class MessageTooLarge(Exception):
    """The content header declares a body larger than the configured maximum."""

    def __init__(self, body_size: int, limit: int) -> None:
        self.body_size = body_size
        self.limit = limit
        super().__init__(f"message size {body_size} is larger than configured max size {limit}")


@dataclass(slots=True)  # one per message: not frozen, which would cost 3x to build
class AssembledMessage:
    """A complete published message."""

    method: commands.Basic.Publish
    properties: commands.Basic.Properties
    body: bytes
    # The property flags and list as the client encoded them, so a broker that
    # stores properties in wire form need not encode them again.
    raw_properties: bytes = b""


@dataclass(slots=True)
class ContentAssembler:
    """The content state of one channel (see the module docstring)."""

    max_message_bytes: int
    _method: commands.Basic.Publish | None = None
    _properties: commands.Basic.Properties | None = None
    _raw_properties: bytes = b""
    _remaining: int = 0
    _parts: list[bytes] = field(default_factory=list)

    @property
    def idle(self) -> bool:
        """True when the channel expects a method frame next."""
        return self._method is None

    @property
    def buffered_bytes(self) -> int:
        """Body bytes held for the message being assembled."""
        return sum(len(part) for part in self._parts)

    def reset(self) -> None:
        """Forget any partial message (the channel is closing)."""
        self._method = None
        self._properties = None
        self._raw_properties = b""
        self._remaining = 0
        self._parts = []

    def start(self, method: commands.Basic.Publish) -> None:
        """basic.publish arrived: its content header must come next."""
        self.reset()
        self._method = method

    def feed(self, frame_type: int, payload: bytes) -> AssembledMessage | None:
        """The next frame on this channel while not idle; the message once complete.

        Raises :class:`ProtocolError` (connection error) or :class:`MessageTooLarge`
        (channel error; the assembler is reset and the caller closes the channel).
        """
        method = self._method
        if method is None:
            raise RuntimeError("feed() while idle")
        if self._properties is None:
            if frame_type != FRAME_HEADER:
                raise ProtocolError(
                    ReplyCode.UNEXPECTED_FRAME,
                    f"expected content header for class {_BASIC}, "
                    "got non content header frame instead",
                    _BASIC,
                    _PUBLISH,
                )
            return self._header(method, payload)
        if frame_type != FRAME_BODY:
            raise ProtocolError(
                ReplyCode.UNEXPECTED_FRAME,
                "expected content body, got non content body frame instead",
                _BASIC,
                _PUBLISH,
            )
        return self._body(method, self._properties, payload)

    def _header(self, method: commands.Basic.Publish, payload: bytes) -> AssembledMessage | None:
        prefix = decode_content_header(payload)
        if prefix.weight != 0:
            raise ProtocolError(
                ReplyCode.UNEXPECTED_FRAME,
                f"expected content header for class {_BASIC} with weight 0, "
                f"got weight {prefix.weight} instead",
                _BASIC,
                _PUBLISH,
            )
        if prefix.class_id != _BASIC:
            raise ProtocolError(
                ReplyCode.UNEXPECTED_FRAME,
                f"expected content header for class {_BASIC}, "
                f"got one for class {prefix.class_id} instead",
                _BASIC,
                _PUBLISH,
            )
        if prefix.body_size > self.max_message_bytes:
            self.reset()
            raise MessageTooLarge(prefix.body_size, self.max_message_bytes)
        properties = decode_properties(payload)
        raw_properties = bytes(payload[_CONTENT_HEADER_PREFIX:])
        if prefix.body_size == 0:
            self.reset()
            return AssembledMessage(method, properties, b"", raw_properties)
        self._properties = properties
        self._raw_properties = raw_properties
        self._remaining = prefix.body_size
        return None

    def _body(
        self,
        method: commands.Basic.Publish,
        properties: commands.Basic.Properties,
        payload: bytes,
    ) -> AssembledMessage | None:
        if len(payload) > self._remaining:
            raise ProtocolError(
                ReplyCode.FRAME_ERROR,
                "content body frame exceeds remaining content size "
                f"({len(payload)} > {self._remaining})",
                _BASIC,
                _PUBLISH,
            )
        if payload:
            self._parts.append(payload)
            self._remaining -= len(payload)
        if self._remaining:
            return None
        body = b"".join(self._parts)
        raw_properties = self._raw_properties
        self.reset()
        return AssembledMessage(method, properties, body, raw_properties)
