"""build_frame_messages: a frame's messages share a template's checked parts only where
checking them in full would give the same message, and refuse exactly what it refuses."""

from __future__ import annotations

import itertools
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from api.http.http_errors import ApiError
from api.http.http_publish import build_message, exchange_name
from api.http.ws_frames import FrameError, PublishFrame, parse_publish
from api.http.ws_publish_build import build_frame_messages
from logbroker.broker import Broker
from logbroker.broker_config import BrokerConfig, Session
from logbroker.errors import BrokerError
from logbroker.message import Message

SESSION = Session("c1", "guest", "/")
MAX_BYTES = 100


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    opened = Broker.open(BrokerConfig(data_dir=str(tmp_path), max_message_bytes=MAX_BYTES))
    yield opened
    await opened.close()


def frame_of(*messages: dict[str, Any]) -> PublishFrame:
    return parse_publish({"op": "publish", "messages": [
        {"id": index, **message} for index, message in enumerate(messages)]})


def in_full(broker: Broker, fields: dict[str, Any], index: int) -> Message | str:
    """The message as a frame of its own would make it: every check, nothing shared."""
    exchange = fields.get("exchange", "")
    if not isinstance(exchange, str):
        return f"messages.{index}.exchange must be a string"
    try:
        return build_message(broker, SESSION, exchange_name(exchange), fields, index, set())
    except ApiError as error:
        return error.reason
    except BrokerError as error:
        return error.text


def same(built: Message | str, expected: Message | str) -> bool:
    if isinstance(built, str) or isinstance(expected, str):
        return built == expected
    return (built.exchange, built.routing_key, built.body, built.encoded_properties(),
            built.timestamp_ms) == (expected.exchange, expected.routing_key, expected.body,
                                    expected.encoded_properties(), expected.timestamp_ms)


async def test_equal_fields_share_the_checked_parts_and_keep_their_own_payloads(
        broker: Broker) -> None:
    fields = {"exchange": "amq.direct", "routing_key": "k", "properties": {"delivery_mode": 2}}
    built = build_frame_messages(broker, SESSION, frame_of(
        *({**fields, "payload": f"m{i}"} for i in range(3))))
    assert all(isinstance(message, Message) for message in built)
    messages = [message for message in built if isinstance(message, Message)]
    assert [message.body for message in messages] == [b"m0", b"m1", b"m2"]
    assert messages[1].properties is messages[0].properties
    assert messages[2].encoded_properties() is messages[0].encoded_properties()
    assert {(m.exchange, m.routing_key, m.properties.delivery_mode) for m in messages} == {
        ("amq.direct", "k", 2)}


@pytest.mark.parametrize("value", [True, 2.0])
async def test_properties_equal_only_as_python_values_are_checked_in_full(
        broker: Broker, value: object) -> None:
    # true == 1 and 2.0 == 2 in Python; as JSON they are not an integer property.
    built = build_frame_messages(broker, SESSION, frame_of(
        {"properties": {"delivery_mode": 2 if value == 2 else 1}},
        {"properties": {"delivery_mode": value}}))
    assert isinstance(built[0], Message)
    assert built[1] == "messages.1.properties.delivery_mode must be an integer in [1, 2]"


async def test_a_payload_that_differs_in_kind_or_size_is_refused_as_in_full(
        broker: Broker) -> None:
    built = build_frame_messages(broker, SESSION, frame_of(
        {"payload": "ok"}, {"payload": 5}, {"payload": "x" * (MAX_BYTES + 1)}, {"payload": "x"}))
    assert isinstance(built[0], Message) and isinstance(built[3], Message)
    assert built[1] == "payload must be a string"
    assert built[2] == (f"message size {MAX_BYTES + 1} is larger than configured max size "
                        f"{MAX_BYTES}")


async def test_a_refused_message_is_never_a_template(broker: Broker) -> None:
    built = build_frame_messages(broker, SESSION, frame_of(
        {"properties": {"user_id": "alice"}}, {"properties": {"user_id": "alice"}},
        {"properties": {"user_id": "guest"}}))
    assert built[0] == built[1] == ("user_id property set to 'alice' but authenticated user "
                                    "was 'guest'")
    assert isinstance(built[2], Message)


def test_parse_publish_takes_ids_and_refuses_the_frame_for_a_bad_one() -> None:
    assert parse_publish({"op": "publish", "id": "a", "payload": "p"}) == PublishFrame(
        ["a"], [{"op": "publish", "id": "a", "payload": "p"}], True)
    assert frame_of({}, {}).ids == [0, 1]
    for bad in (True, None, 1.5, [1]):
        with pytest.raises(FrameError) as raised:
            parse_publish({"op": "publish", "messages": [{"id": 1}, {"id": bad}]})
        assert raised.value.field == "messages.1.id"
    with pytest.raises(FrameError) as raised:
        parse_publish({"op": "publish", "messages": [{"id": 1}, "x"]})
    assert raised.value.field == "messages.1"


VARIANTS: dict[str, list[Any]] = {
    "exchange": ["", "amq.direct", "amq.default", "missing", 5],
    "routing_key": ["q", "r", 7, "\u00e9" * 128],
    "payload": ["x", "y" * 40, 3, "aGk=", "z" * (MAX_BYTES + 1)],
    "payload_encoding": ["string", "base64", "hex"],
    "properties": [None, [], {}, {"priority": 1, "delivery_mode": 2},
                   {"delivery_mode": 2, "priority": 1}, {"priority": True, "delivery_mode": 2},
                   {"headers": {"k": "v"}}, {"user_id": "alice"}, {"user_id": "guest"},
                   {"expiration": "bad"}, {"expiration": 60000}, {"content_type": None},
                   # equal as Python values, not as JSON: drawn more often
                   *[{"delivery_mode": value} for value in (1, True, 2, 2.0)] * 3],
}


def random_frame(rng: random.Random) -> list[dict[str, Any]]:
    """Messages that mostly repeat the one before with another payload, as real frames do,
    or with one other field."""
    messages: list[dict[str, Any]] = []
    for _ in range(rng.randint(1, 12)):
        draw = rng.random()
        if messages and draw < 0.5:
            fields = {**messages[-1], "payload": rng.choice(VARIANTS["payload"])}
        elif messages and draw < 0.8:
            name = rng.choice(list(VARIANTS))
            fields = {**messages[-1], name: rng.choice(VARIANTS[name])}
        else:
            fields = {name: rng.choice(values) for name, values in VARIANTS.items()
                      if rng.random() < 0.5}
        messages.append(fields)
    return messages


async def test_every_message_comes_out_as_checking_it_in_full_would_make_it(
        broker: Broker) -> None:
    rng = random.Random(20261127)
    shared = 0
    for _ in range(400):
        messages = random_frame(rng)
        built = build_frame_messages(broker, SESSION, frame_of(*messages))
        for index, fields in enumerate(messages):
            assert same(built[index], in_full(broker, fields, index)), (messages, index)
        shared += sum(1 for a, b in itertools.pairwise(built)
                      if isinstance(a, Message) and isinstance(b, Message)
                      and a.encoded_properties() is b.encoded_properties())
    assert shared > 200  # the template path was taken, not only the full one
