"""`build_frame_messages`: the messages of a WebSocket publish frame, each checked.

Each message stands alone, as an AMQP basic.publish: `build_message` checks its
fields (exchange, routing key, payload, properties) and RabbitMQ's publish
checks, and a message that fails is refused with the reason while the others
are published. That costs about 2 µs per message, a fifth of the broker's CPU
for a WebSocket publish, and a frame's messages mostly differ only in `id` and
`payload`.

So once a message of the frame has been built, it is the frame's *template*: a
later message whose fields equal the template's except for `id` and `payload`
(the same exchange and routing key, `payload_encoding` "string", and properties
equal with values of the same types, made only of scalars, as `build_message`
caches them)
passed the same checks, so it shares the template's exchange, routing key and
properties (their decoded and encoded forms; they hold only immutable values,
as `build_message`'s own cache shares them). Only its payload is its own: it
must be a string, and its size is checked against the limit. Whatever differs
goes the full way, which stays the one place that refuses a message, and
becomes the new template.

Why "the same types": JSON's `true` equals 1 and `1.0` equals 1 in Python, and
properties that a check refuses must not pass as equal to ones it accepted.
The template's values are scalars (no headers table), so equal values of the
same types are the same values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.http.http_errors import ApiError
from api.http.http_publish import SCALAR_TYPES, build_message, exchange_name
from api.http.ws_frames import PublishFrame
from logbroker.broker import Broker
from logbroker.broker_config import Session
from logbroker.errors import BrokerError
from logbroker.message import Message

__all__ = ["build_frame_messages"]


def build_frame_messages(broker: Broker, session: Session, publish: PublishFrame
                         ) -> list[Message | str]:
    """Each message of the frame, or why it is refused (a str: it will be nacked)."""
    checked: set[str] = set()  # exchanges whose checks this frame passed
    built: list[Message | str] = []
    template: _Template | None = None
    max_bytes = broker.config.max_message_bytes
    for index, fields in enumerate(publish.fields):
        if template is not None:
            message = template.reuse(fields, max_bytes)
            if message is not None:
                built.append(message)
                continue
        result = _build(broker, session, publish, index, checked)
        built.append(result)
        if isinstance(result, Message):
            template = _Template.of(fields, result)
    return built


def _build(broker: Broker, session: Session, publish: PublishFrame, index: int,
           exchanges_checked: set[str]) -> Message | str:
    """The message, from its fields checked the full way, or why it is refused."""
    fields = publish.fields[index]
    exchange = fields.get("exchange", "")
    if not isinstance(exchange, str):
        return f"{publish.field_prefix(index)}.exchange must be a string".removeprefix(".")
    try:
        return build_message(broker, session, exchange_name(exchange), fields,
                             "" if publish.top_level else index, exchanges_checked)
    except ApiError as error:
        return error.reason
    except BrokerError as error:
        return error.text


class _Template:
    """A built message whose checked parts later messages of the frame may share."""

    __slots__ = ("exchange", "message", "properties", "routing_key", "value_types")

    def __init__(self, exchange: Any, routing_key: Any, properties: dict[str, Any],
                 message: Message) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        self.properties = properties
        self.value_types = tuple(map(type, properties.values()))
        self.message = message

    @classmethod
    def of(cls, fields: Mapping[str, Any], message: Message) -> _Template | None:
        """The message as a template, if its fields allow one."""
        properties = fields.get("properties") or {}
        if (fields.get("payload_encoding", "string") != "string"
                or not isinstance(properties, dict)
                or not set(map(type, properties.values())) <= SCALAR_TYPES):
            return None
        return cls(fields.get("exchange", ""), fields.get("routing_key", ""), properties,
                   message)

    def reuse(self, fields: Mapping[str, Any], max_bytes: int) -> Message | None:
        """The message of `fields` sharing the template's checked parts; None when its
        fields differ (or its payload is not a string, or too large): build it in full."""
        payload = fields.get("payload", "")
        if (type(payload) is not str
                or fields.get("exchange", "") != self.exchange
                or fields.get("routing_key", "") != self.routing_key
                or fields.get("payload_encoding", "string") != "string"):
            return None
        properties = fields.get("properties") or {}
        if (properties != self.properties
                or tuple(map(type, properties.values())) != self.value_types):
            return None
        body = payload.encode("utf-8", "surrogatepass")
        if len(body) > max_bytes:
            return None  # the full way refuses it, with RabbitMQ's text
        return self.message.with_body(body)
