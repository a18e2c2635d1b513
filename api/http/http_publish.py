"""Publishing from REST and WebSocket: the AMQP basic.publish checks, then the broker's path.

`publish_many` answers once every message is confirmed (durable in every queue
it was routed to) or nacked, one outcome per message; calls run concurrently,
and the order in which they are started is the order the messages enter each
queue. A REST publish to a queue that holds its publishers back
(logbroker.queue.publisher_flow) is answered once the hold ends: an HTTP
client's next request waits, as an AMQP connection in flow goes unread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from api.http.http_errors import ApiError
from api.http.message_codec import decode_payload, properties_from_json
from logbroker.broker import Broker
from logbroker.broker_config import Session
from logbroker.errors import BrokerError
from logbroker.message import Message, Properties, encode_properties
from logbroker.publish_checks import check_publish
from logbroker.publishing import PublishResult
from logbroker.queue.flow_gate import take_pending, wait_for_holds

DEFAULT_EXCHANGE_NAMES = ("", "amq.default")


@dataclass(frozen=True)
class PublishOutcome:
    routed: bool
    confirmed: bool
    reason: str = ""


_CONFIRMED = {True: PublishOutcome(True, True), False: PublishOutcome(False, True)}


def exchange_name(name: str) -> str:
    return "" if name == "amq.default" else name


def build_message(broker: Broker, session: Session, exchange: str, item: Mapping[str, Any],
                  field: Field = "", exchanges_checked: set[str] | None = None) -> Message:
    """Check one publish request (RabbitMQ's JSON shape) and make its message.

    `field`: where the message is in the request, for errors: a dotted prefix, or
    its index in a frame's `messages` (the prefix is then built only for an error).
    `exchanges_checked`: one set per request or frame, so each exchange's checks
    (existence, internal, write permission) run once for it (`check_publish`)."""
    routing_key = item.get("routing_key", "")
    # An ASCII key (the usual one) is as many bytes as characters; another is encoded,
    # which also refuses lone surrogates (JSON allows "\ud800").
    if not isinstance(routing_key, str) or (
            len(routing_key) if routing_key.isascii() else _utf8_bytes(routing_key, field)
    ) > 255:
        raise ApiError(400, "routing_key must be a string of at most 255 bytes",
                       _at(field, "routing_key"))
    payload = item.get("payload", "")
    if not isinstance(payload, str):
        raise ApiError(400, "payload must be a string", _at(field, "payload"))
    encoding = item.get("payload_encoding", "string")
    body = (payload.encode("utf-8", "surrogatepass") if encoding == "string"  # the usual
            else decode_payload(payload, encoding if isinstance(encoding, str) else "",
                                _at(field, "payload")))
    raw_properties = item.get("properties") or {}
    if not isinstance(raw_properties, dict):
        raise ApiError(400, "properties must be an object", _at(field, "properties"))
    properties, encoded = _properties(raw_properties, field)
    check_publish(broker, session, exchange, properties, len(body), exchanges_checked)
    return Message(exchange, routing_key, body, properties, _encoded_properties=encoded)


Field = str | int  # a dotted prefix, or an index in a frame's `messages`


def _at(field: Field, name: str) -> str:
    """The dotted name of `name` in the request: built only for an error."""
    if isinstance(field, int):
        return f"messages.{field}.{name}"
    return f"{field}.{name}" if field else name


def _utf8_bytes(routing_key: str, field: Field) -> int:
    try:
        return len(routing_key.encode())
    except UnicodeEncodeError as error:
        raise ApiError(400, "routing_key must be valid Unicode text (no lone surrogates)",
                       _at(field, "routing_key")) from error


# Recently seen JSON properties made only of scalars, decoded and AMQP-encoded: a
# batch's messages mostly carry the same ones, and pamqp's encoder was a third of the
# broker's CPU per WebSocket publish. The messages share the Properties object, which
# holds only immutable values (no headers table), and the broker never changes a
# message's properties in place (dead-lettering copies them). The key keeps each
# value's type, so a bool never passes for the int it hashes like.
_ENCODED_SEEN: dict[tuple[tuple[tuple[str, Any], ...], tuple[type, ...]],
                    tuple[Properties, bytes]] = {}
_ENCODED_SEEN_MAX = 256
SCALAR_TYPES = frozenset({str, int, bool, type(None)})


def _properties(raw: Mapping[str, Any], field: Field) -> tuple[Properties, bytes]:
    """The properties (for the checks, read only) and their encoding (cached when made
    only of scalars).
    `field`: the message's place in the request, for errors."""
    try:
        # Unsorted: the same properties in another order only miss the cache.
        key = (tuple(raw.items()), tuple(map(type, raw.values())))
        seen = _ENCODED_SEEN.get(key)
    except TypeError:  # a headers table (a dict) or a list: not cacheable
        key = None
    else:
        if seen is not None:
            return seen
    where = _at(field, "properties")
    try:
        properties = properties_from_json(raw, where)
        encoded = encode_properties(properties)  # now: a bad one must fail this message only
    except UnicodeEncodeError as error:
        raise ApiError(400, "properties must be valid Unicode text (no lone surrogates)",
                       where) from error
    if key is None or not set(key[1]) <= SCALAR_TYPES:
        return properties, encoded
    if len(_ENCODED_SEEN) >= _ENCODED_SEEN_MAX:
        _ENCODED_SEEN.clear()
    seen = _ENCODED_SEEN[key] = (properties, encoded)
    return seen


def check_not_blocked(broker: Broker) -> None:
    alarms = broker.resources.alarms
    if alarms.active:
        raise ApiError(503, f"publishing is blocked by a resource alarm: {alarms.reason}")


async def publish_many(broker: Broker, vhost: str, messages: Sequence[Message]
                       ) -> list[PublishOutcome]:
    """Publish in order with one log write per queue; one outcome per message. The
    answer also waits for the holds the publish met (a REST request)."""
    met: list[asyncio.Future[None]] = []
    outcomes = await start_publish_many(broker, vhost, messages, met)
    await wait_for_holds(take_pending(met))
    return outcomes


def start_publish_many(broker: Broker, vhost: str, messages: Sequence[Message],
                       holds: list[asyncio.Future[None]], publisher_id: str = "",
                       ) -> Awaitable[list[PublishOutcome]]:
    """`publish_many`, routed and appended during this call (`Publisher.start_batch`),
    so `holds` already has the queues that hold this publisher back when it returns;
    the answer does not wait for them."""
    # start_batch reports its errors through the future it returns.
    started = broker.publisher.start_batch(vhost, messages, holds, publisher_id)
    return _outcomes(started, len(messages))


async def _outcomes(started: Awaitable[list[PublishResult]], count: int
                    ) -> list[PublishOutcome]:
    try:
        results = await started
    except (BrokerError, OSError) as error:
        return _failed(error, count)
    return [_CONFIRMED[r.routed] if r.confirmed
            else PublishOutcome(r.routed, False, r.reason or "rejected by a queue")
            for r in results]


def _failed(error: BrokerError | OSError, count: int) -> list[PublishOutcome]:
    reason = error.text if isinstance(error, BrokerError) else f"storage error: {error}"
    return [PublishOutcome(False, False, reason)] * count


async def publish_one(broker: Broker, vhost: str, message: Message) -> PublishOutcome:
    return (await publish_many(broker, vhost, [message]))[0]
