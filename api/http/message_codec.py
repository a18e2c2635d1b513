"""Messages as JSON: RabbitMQ's HTTP API shapes for properties and payloads.

A payload travels as `payload` plus `payload_encoding`: "string" (UTF-8 text)
or "base64". On the way out, `encoding="auto"` gives "string" when the body is
valid UTF-8 and "base64" otherwise, as RabbitMQ's get does.
"""

from __future__ import annotations

import base64
import binascii
import datetime
from collections.abc import Mapping
from typing import Any

from api.http.http_errors import ApiError
from api.http.views import jsonable
from logbroker.message import Message, Properties
from segments.record_batch import LogRecord

_STRING_PROPERTIES = ("content_type", "content_encoding", "correlation_id", "reply_to",
                      "expiration", "message_id", "type", "user_id", "app_id", "cluster_id")
_INT_PROPERTIES = {"delivery_mode": (1, 2), "priority": (0, 255)}


def properties_from_json(data: Mapping[str, Any] | None, field: str = "properties"
                         ) -> Properties:
    """pamqp properties from RabbitMQ's JSON form; 400 naming the field on a bad value."""
    values: dict[str, Any] = {}
    for name, value in (data or {}).items():
        where = f"{field}.{name}"
        if value is None:
            continue
        if name in _STRING_PROPERTIES:
            if isinstance(value, int) and not isinstance(value, bool) and name == "expiration":
                value = str(value)
            if not isinstance(value, str):
                raise ApiError(400, f"{where} must be a string", where)
            values["message_type" if name == "type" else name] = value
        elif name in _INT_PROPERTIES:
            low, high = _INT_PROPERTIES[name]
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise ApiError(400, f"{where} must be an integer in [{low}, {high}]", where)
            values[name] = value
        elif name == "timestamp":
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**42:
                raise ApiError(400, f"{where} must be seconds since the epoch", where)
            values[name] = datetime.datetime.fromtimestamp(value, datetime.UTC)
        elif name == "headers":
            if not isinstance(value, dict):
                raise ApiError(400, f"{where} must be an object", where)
            values[name] = _headers(value, where)
        else:
            raise ApiError(400, f"{where}: unknown message property", where)
    return Properties(**values)


def _headers(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    for key, value in table.items():
        if isinstance(value, float) and value != value:  # NaN has no AMQP encoding
            raise ApiError(400, f"{where}.{key}: NaN is not allowed", f"{where}.{key}")
        if isinstance(value, int) and not isinstance(value, bool) and not -2**63 <= value < 2**63:
            raise ApiError(400, f"{where}.{key}: integer out of range", f"{where}.{key}")
        if isinstance(value, dict):
            _headers(value, f"{where}.{key}")
    return dict(table)


def properties_to_json(properties: Properties) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("content_type", "content_encoding", "correlation_id", "reply_to", "expiration",
                 "message_id", "user_id", "app_id", "delivery_mode", "priority"):
        value = getattr(properties, name)
        if value is not None:
            out[name] = value
    if properties.message_type:
        out["type"] = properties.message_type
    if properties.cluster_id:
        out["cluster_id"] = properties.cluster_id
    if properties.timestamp is not None:
        out["timestamp"] = int(properties.timestamp.timestamp())
    if properties.headers:
        out["headers"] = jsonable(properties.headers)
    return out


def decode_payload(payload: str, encoding: str, field: str = "payload") -> bytes:
    """The body of `payload` under `encoding`; errors name `field`, or its sibling
    `payload_encoding` (`messages.3.payload` -> `messages.3.payload_encoding`)."""
    if encoding == "string":
        return payload.encode("utf-8", "surrogatepass")
    if encoding == "base64":
        try:
            return base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError) as error:
            raise ApiError(400, f"{field} is not valid base64", field) from error
    prefix, dot, _ = field.rpartition(".")
    encoding_field = f"{prefix}{dot}payload_encoding"
    raise ApiError(400, f"{encoding_field} must be 'string' or 'base64'", encoding_field)


def encode_payload(body: bytes, encoding: str = "auto") -> tuple[str, str]:
    """(payload, payload_encoding) for `body` under "auto" or "base64"."""
    if encoding != "base64":
        try:
            return body.decode("utf-8"), "string"
        except UnicodeDecodeError:
            pass
    return base64.b64encode(body).decode("ascii"), "base64"


def message_json(message: Message, encoding: str = "auto", truncate: int | None = None,
                 properties: dict[str, Any] | None = None) -> dict[str, Any]:
    """The message in RabbitMQ's get shape; `properties`: its JSON form, if known already."""
    body = message.body if truncate is None else message.body[:truncate]
    payload, payload_encoding = encode_payload(body, encoding)
    if properties is None:
        properties = properties_to_json(message.properties)
    return {
        "payload_bytes": len(message.body), "exchange": message.exchange,
        "routing_key": message.routing_key, "properties": properties,
        "payload": payload, "payload_encoding": payload_encoding,
    }


class RecordEncoder:
    """Log records as replay returns them: offset and timestamp, then the message.

    Replayed records mostly share their properties (one producer, one kind of
    message): each distinct encoding is decoded once per encoder.
    """

    def __init__(self, encoding: str = "auto", limit: int = 1024) -> None:
        self._encoding = encoding
        self._properties: dict[bytes, dict[str, Any]] = {}
        self._limit = limit

    def __call__(self, record: LogRecord) -> dict[str, Any]:
        message = Message.from_record(record)
        encoded = message.encoded_properties()
        properties = self._properties.get(encoded)
        if properties is None:
            properties = properties_to_json(message.properties)
            if len(self._properties) < self._limit:
                self._properties[encoded] = properties
        out: dict[str, Any] = {"offset": record.offset, "timestamp": record.timestamp_ms}
        out.update(message_json(message, self._encoding, properties=properties))
        return out
