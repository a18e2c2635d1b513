"""Text the JSON answers could not encode: refused on the way in, converted on the way out.

Before, a queue declared with `{"arguments": {"x": "\\ud800"}}` was accepted, and every
listing that showed it answered 500 from then on; and a queue declared over AMQP with
a byte-string argument that is not UTF-8 made the definitions export a 500. The app
runs on a real single-node broker in a temporary directory, called through httpx's
ASGI transport.
"""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.http.api_context import ApiContext, Listeners
from api.http.app import create_app
from api.http.text_checks import unencodable_field
from logbroker.broker import Broker
from logbroker.broker_config import BrokerConfig
from logbroker.metadata.commands import DeclareQueue

LONE = "\ud800"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    opened = Broker.open(BrokerConfig(data_dir=str(tmp_path), node_name="n1"))
    yield opened
    await opened.close()


@pytest.fixture
async def http(broker: Broker) -> AsyncIterator[httpx.AsyncClient]:
    context = ApiContext(broker, Listeners(5672, 15672, "127.0.0.1"))
    transport = httpx.ASGITransport(app=create_app(context))
    async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                 auth=("guest", "guest")) as client:
        yield client


async def _send(http: httpx.AsyncClient, method: str, path: str, body: Any) -> httpx.Response:
    # json.dumps escapes the surrogate ("\\ud800"): valid JSON text, as a client sends it.
    return await http.request(method, path, content=json.dumps(body),
                              headers={"content-type": "application/json"})


@pytest.mark.parametrize("method, path, body, field", [
    ("PUT", "/api/queues/%2F/q", {"arguments": {"x-foo": LONE}}, "arguments.x-foo"),
    ("PUT", "/api/queues/%2F/q", {"arguments": {"x": [1, {"a": LONE}]}}, "arguments.x.1.a"),
    ("PUT", "/api/queues/%2F/q", {"arguments": {"\udc00": 1}}, "arguments.\\udc00"),
    ("PUT", "/api/exchanges/%2F/x", {"type": "direct", "arguments": {"k": LONE}}, "arguments.k"),
    ("POST", "/api/bindings/%2F/e/amq.direct/q/qq", {"routing_key": LONE}, "routing_key"),
    ("PUT", "/api/policies/%2F/p", {"pattern": ".*", "definition": {"x": LONE}},
     "definition.x"),
    ("PUT", "/api/users/u", {"password": LONE, "tags": ""}, "password"),
    ("POST", "/api/definitions", {"queues": [{"name": LONE, "vhost": "/"}]}, "queues.0.name"),
    ("POST", "/api/exchanges/%2F/amq.default/publish",
     {"routing_key": "qq", "payload": LONE, "payload_encoding": "string", "properties": {}},
     "payload"),
    ("POST", "/api/exchanges/%2F/amq.default/publish-batch",
     {"messages": [{"routing_key": "qq", "payload": "ok"},
                   {"routing_key": "qq", "payload": "a" + LONE}]}, "messages.1.payload"),
])
async def test_a_lone_surrogate_is_a_400_naming_the_field_and_nothing_is_kept(
        http: httpx.AsyncClient, method: str, path: str, body: Any, field: str) -> None:
    assert (await http.put("/api/queues/%2F/qq", json={})).status_code in (201, 204)
    answer = await _send(http, method, path, body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["field"] == field
    for listing in ("/api/queues", "/api/exchanges", "/api/bindings", "/api/policies",
                    "/api/users", "/api/definitions"):
        assert (await http.get(listing)).status_code == 200, listing
    assert (await http.get("/api/queues/%2F/qq")).json()["messages"] == 0


async def test_text_outside_the_basic_plane_is_kept_and_listed(http: httpx.AsyncClient) -> None:
    answer = await _send(http, "PUT", "/api/queues/%2F/q", {"arguments": {"x-é": "ü😀"}})
    assert answer.status_code in (201, 204), answer.text
    assert (await http.get("/api/queues/%2F/q")).json()["arguments"] == {"x-é": "ü😀"}


async def test_bodies_that_are_not_json_are_left_to_fastapi(http: httpx.AsyncClient) -> None:
    answer = await http.put("/api/queues/%2F/q", content=b"{not json",
                            headers={"content-type": "application/json"})
    assert answer.status_code == 400 and answer.json()["field"] == "body"


def test_the_walk_finds_the_first_field_in_document_order() -> None:
    assert unencodable_field({"a": "ok", "b": [LONE], "c": LONE}) == "b.0"
    assert unencodable_field([{"x": 1}, "ü", LONE]) == "2"
    assert unencodable_field(LONE) == "body"
    assert unencodable_field({"deep": [[[{"k": "fine"}]]], "n": None, "t": True}) is None
    # What the fast check (orjson) cannot encode for other reasons is walked instead.
    assert unencodable_field({"big": 2**70, "x": [LONE]}) == "x.0"
    assert unencodable_field({"big": 2**70}) is None
    nested: object = "fine"
    for _ in range(300):  # deeper than orjson's limit
        nested = [nested]
    assert unencodable_field({"n": nested}) is None


async def test_amqp_values_in_arguments_export_as_json(broker: Broker,
                                                      http: httpx.AsyncClient) -> None:
    """AMQP tables hold bytes (not always UTF-8), decimals and timestamps; the export
    shows them as every queue view does."""
    arguments = {"x-bytes": b"\xff\xfe", "x-decimal": decimal.Decimal("1.5"),
                 "x-time": datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC),
                 "x-list": [b"ok", 1]}
    await broker.apply(DeclareQueue("/", "amqp-declared", arguments=arguments))
    answer = await http.get("/api/definitions")
    assert answer.status_code == 200, answer.text
    [queue] = [q for q in answer.json()["queues"] if q["name"] == "amqp-declared"]
    assert queue["arguments"] == {"x-bytes": "\ufffd\ufffd", "x-decimal": 1.5,
                                  "x-time": 1577836800, "x-list": ["ok", 1]}
    view = (await http.get("/api/queues/%2F/amqp-declared")).json()
    assert view["arguments"] == queue["arguments"]


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
async def test_a_path_whose_escapes_are_not_utf8_is_a_400_and_creates_nothing(
        http: httpx.AsyncClient, broker: Broker, method: str) -> None:
    answer = await http.request(method, "/api/queues/%2F/%ED%A0%80", json={})
    assert answer.status_code == 400
    assert answer.json()["error"] == "bad_request"
    assert "not UTF-8" in answer.json()["reason"]
    listed = await http.get("/api/queues")
    assert listed.status_code == 200 and listed.json() == []
