"""What the client sends and receives: messages, records, confirms; payload encoding.

Bodies are bytes on the client side. On the wire (REST and WebSocket) a body
is `payload` + `payload_encoding`: "string" for UTF-8 text, "base64" otherwise.
Properties are RabbitMQ's JSON form (`content_type`, `delivery_mode`,
`headers`, ...), passed through as a dict.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from api.client.errors import ProtocolError

Properties = dict[str, Any]


def encode_body(body: bytes | str) -> tuple[str, str]:
    """(payload, payload_encoding): text as "string", bytes as "string" when valid UTF-8."""
    if isinstance(body, str):
        return body, "string"
    try:
        return body.decode("utf-8"), "string"
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), "base64"


def decode_body(payload: Any, encoding: Any) -> bytes:
    if not isinstance(payload, str):
        raise ProtocolError("a message payload is not a string")
    if encoding == "base64":
        try:
            return base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError) as error:
            raise ProtocolError("a message payload is not valid base64") from error
    return payload.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class OutgoingMessage:
    """One message to publish; `exchange` None means the publish call's exchange."""

    routing_key: str
    body: bytes | str
    properties: Properties | None = None
    exchange: str | None = None

    def wire(self) -> dict[str, Any]:
        payload, encoding = encode_body(self.body)
        return {"routing_key": self.routing_key, "payload": payload,
                "payload_encoding": encoding, "properties": dict(self.properties or {})}


@dataclass(frozen=True)
class PublishResult:
    """A publish's outcome: `confirmed` once durable, `routed` if any queue took it."""

    routed: bool
    confirmed: bool
    reason: str = ""

    @classmethod
    def from_json(cls, data: Any) -> PublishResult:
        if not isinstance(data, Mapping):
            raise ProtocolError("a publish result is not an object")
        return cls(bool(data.get("routed")), bool(data.get("confirmed")),
                   str(data.get("reason") or ""))


@dataclass(frozen=True)
class GotMessage:
    """A message from `get` (RabbitMQ's get) or a lease."""

    exchange: str
    routing_key: str
    properties: Properties
    body: bytes
    redelivered: bool
    message_count: int
    delivery_tag: int | None = None
    offset: int | None = None
    lease_expires_at: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GotMessage:
        return cls(
            exchange=str(data.get("exchange", "")), routing_key=str(data.get("routing_key", "")),
            properties=dict(data.get("properties") or {}),
            body=decode_body(data.get("payload", ""), data.get("payload_encoding")),
            redelivered=bool(data.get("redelivered")),
            message_count=int(data.get("message_count") or 0),
            delivery_tag=_optional_int(data.get("delivery_tag")),
            offset=_optional_int(data.get("offset")),
            lease_expires_at=_optional_int(data.get("lease_expires_at")),
        )


@dataclass(frozen=True)
class Record:
    """A record of a queue's log, as replay reads it (non-destructively)."""

    offset: int
    timestamp: int
    exchange: str
    routing_key: str
    properties: Properties
    body: bytes

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Record:
        try:
            return cls(int(data["offset"]), int(data.get("timestamp") or 0),
                       str(data.get("exchange", "")), str(data.get("routing_key", "")),
                       dict(data.get("properties") or {}),
                       decode_body(data.get("payload", ""), data.get("payload_encoding")))
        except (KeyError, TypeError, ValueError) as error:
            raise ProtocolError(f"a replayed record is malformed: {error}") from error

    def to_json(self) -> dict[str, Any]:
        """The JSON-lines form: the body as text when UTF-8, else base64 with body_encoding."""
        out: dict[str, Any] = {"offset": self.offset, "timestamp": self.timestamp,
                               "exchange": self.exchange, "routing_key": self.routing_key,
                               "properties": self.properties}
        out.update(body_json(self.body))
        return out


def body_json(body: bytes) -> dict[str, str]:
    try:
        return {"body": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body": base64.b64encode(body).decode("ascii"), "body_encoding": "base64"}


@dataclass(frozen=True)
class ReplayPage:
    """One page of a REST replay: its records, where the next page starts, the log's range."""

    records: list[Record]
    next_offset: int
    first_offset: int
    end_offset: int


@dataclass(frozen=True)
class SettleResult:
    """Tags settled, and tags unknown (their lease expired: the message is redelivered)."""

    settled: list[int] = field(default_factory=list)
    unknown: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class NodeStatus:
    """One node's answer to `status`: up with its overview, or down with the error."""

    url: str
    up: bool
    overview: dict[str, Any] = field(default_factory=dict)
    error: str = ""


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)
