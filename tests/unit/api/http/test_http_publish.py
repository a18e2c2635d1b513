"""build_message: RabbitMQ's JSON publish shape to a Message, with the properties'
encoding reused across messages that carry the same scalar properties."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from api.http.http_errors import ApiError
from api.http.http_publish import build_message, publish_many
from logbroker.broker import Broker
from logbroker.broker_config import BrokerConfig, Session
from logbroker.errors import BrokerError
from logbroker.message import encode_properties
from logbroker.queue.publisher_flow import FlowLimits, PublisherFlow
from tests.unit.logbroker.broker.test_broker_flow import RecordingSink


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    opened = Broker.open(BrokerConfig(data_dir=str(tmp_path)))
    yield opened
    await opened.close()


SESSION = Session("c1", "guest", "/")


async def test_equal_scalar_properties_share_one_encoding_that_decodes_to_them(
        broker: Broker) -> None:
    item = {"routing_key": "q", "payload": "hi",
            "properties": {"delivery_mode": 2, "content_type": "text/plain", "priority": 3}}
    first = build_message(broker, SESSION, "", item)
    second = build_message(broker, SESSION, "", {**item, "payload": "ho"})
    assert first.encoded_properties() is second.encoded_properties()
    assert first.properties is second.properties  # no headers: only immutable values
    properties = second.properties
    assert (properties.delivery_mode, properties.content_type, properties.priority) == (
        2, "text/plain", 3)
    assert second.body == b"ho" and second.routing_key == "q"
    assert first.encoded_properties() == encode_properties(properties)


async def test_a_cached_encoding_never_admits_what_the_checks_refuse(broker: Broker) -> None:
    build_message(broker, SESSION, "", {"properties": {"delivery_mode": 1}})
    with pytest.raises(ApiError) as raised:  # True hashes like 1; it must not hit the cache
        build_message(broker, SESSION, "", {"properties": {"delivery_mode": True}})
    assert raised.value.field == "properties.delivery_mode"
    build_message(broker, SESSION, "", {"properties": {"user_id": "guest"}})
    for _ in range(2):  # the second time from the cache: the checks still run
        with pytest.raises(BrokerError, match="user_id"):
            build_message(broker, SESSION, "", {"properties": {"user_id": "alice"}})


async def test_properties_with_headers_are_encoded_per_message(broker: Broker) -> None:
    item = {"properties": {"headers": {"k": "v"}}}
    first = build_message(broker, SESSION, "", item)
    second = build_message(broker, SESSION, "", item)
    assert first.encoded_properties() == second.encoded_properties()
    assert first.properties.headers == {"k": "v"}


async def test_a_batch_checks_each_exchange_once_and_a_refused_one_every_time(
        broker: Broker) -> None:
    checks: list[str] = []
    real_check = broker.access.check
    broker.access.check = lambda session, kind, name, permission: (  # type: ignore[method-assign]
        checks.append(name), real_check(session, kind, name, permission))[1]
    checked: set[str] = set()
    for _ in range(3):
        build_message(broker, SESSION, "amq.direct", {"routing_key": "q"}, "", checked)
    assert checks == ["amq.direct"]
    for _ in range(2):  # not found: refused at each message, never remembered as passed
        with pytest.raises(BrokerError, match="no exchange"):
            build_message(broker, SESSION, "missing", {}, "", checked)
    assert checked == {"amq.direct"}
    build_message(broker, SESSION, "amq.direct", {"routing_key": "q"})  # no set: checked
    assert checks == ["amq.direct", "amq.direct"]


async def test_a_rest_publish_to_a_held_queue_is_answered_once_the_hold_ends(
        broker: Broker) -> None:
    await broker.definitions.declare_queue(SESSION, "busy", durable=True)
    busy = broker.queue("/", "busy")
    assert busy is not None
    busy.flow_gate.flow = PublisherFlow(FlowLimits(high=0, low=0, open_min_ms=0,
                                                   stall_ms=60_000, trial_hold_max_ms=60_000))
    sink = RecordingSink(room=0)  # a consumer out of credit: everything stays ready
    await broker.consuming.consume(SESSION, "busy", sink, consumer_tag="c1")
    message = build_message(broker, SESSION, "", {"routing_key": "busy", "payload": "m"})
    assert (await publish_many(broker, "/", [message]))[0].confirmed  # measured, not held
    answer = asyncio.ensure_future(publish_many(broker, "/", [message]))
    await asyncio.sleep(0.05)
    assert not answer.done() and busy.flow_gate.flow.holding  # written, answer held back
    broker.consuming.channel_closed("/", sink.channel_key, {"busy"})  # no consumer: let go
    assert (await asyncio.wait_for(answer, 1.0))[0].confirmed


@pytest.mark.parametrize("item, field", [
    ({"routing_key": "a\ud800"}, "messages.2.routing_key"),
    ({"routing_key": "\u00e9" * 128}, "messages.2.routing_key"),  # 256 bytes
    ({"properties": {"content_type": "a\ud800"}}, "messages.2.properties"),
    ({"properties": {"headers": {"k": ["x", "\udfff"]}}}, "messages.2.properties"),
])
@pytest.mark.parametrize("where", ["messages.2", 2])  # a prefix, or a WebSocket frame index
async def test_text_that_cannot_be_stored_is_a_400_naming_the_field(
        broker: Broker, item: dict[str, object], field: str, where: str | int) -> None:
    """JSON may carry lone surrogates ("\\ud800"); they have no UTF-8 form, so they must be
    refused here, not fail the write of a whole batch later."""
    with pytest.raises(ApiError) as raised:
        build_message(broker, SESSION, "", item, where)
    assert (raised.value.status, raised.value.field) == (400, field)


async def test_a_payload_error_names_the_message_by_its_index(broker: Broker) -> None:
    with pytest.raises(ApiError) as raised:
        build_message(broker, SESSION, "", {"payload": "!!", "payload_encoding": "base64"}, 4)
    assert raised.value.field == "messages.4.payload"


async def test_an_unknown_payload_encoding_names_the_message_by_its_index(broker: Broker) -> None:
    with pytest.raises(ApiError) as raised:
        build_message(broker, SESSION, "", {"payload": "x", "payload_encoding": "hex"}, 4)
    assert raised.value.field == "messages.4.payload_encoding"
