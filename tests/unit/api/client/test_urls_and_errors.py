"""Broker URLs, failover order, error mapping and the request builders: no broker needed."""

from __future__ import annotations

import httpx
import pytest

from api.client import calls
from api.client.errors import (
    AccessRefused,
    BadRequest,
    InvalidUrl,
    LogbrokerError,
    NotFound,
    ProtocolError,
    Unavailable,
    error_for,
    error_from_response,
)
from api.client.messages import OutgoingMessage, Record, ReplayPage, decode_body, encode_body
from api.client.replay import ReplayCursor
from api.client.urls import DEFAULT_URL, ENV_VAR, Node, NodeRing, parse_url, parse_urls


@pytest.mark.parametrize(("text", "expected"), [
    ("http://alice:s3cret@broker:15000", Node("http://broker:15000", "alice", "s3cret")),
    ("http://broker", Node("http://broker:15672", "guest", "guest")),
    ("https://broker/prefix/", Node("https://broker:443/prefix", "guest", "guest")),
    ("broker:1234", Node("http://broker:1234", "guest", "guest")),
    ("http://a%40b:p%3Aw@[::1]:9", Node("http://[::1]:9", "a@b", "p:w")),
])
def test_parse_url(text: str, expected: Node) -> None:
    assert parse_url(text) == expected


@pytest.mark.parametrize("text", ["ftp://host:1", "http://:1", "http://host:notaport",
                                  "http://host:1/?x=1"])
def test_parse_url_refuses_what_cannot_be_a_broker(text: str) -> None:
    with pytest.raises(InvalidUrl):
        parse_url(text)


def test_invalid_url_message_hides_the_password() -> None:
    with pytest.raises(InvalidUrl) as caught:
        parse_url("ftp://bob:hunter2@host:1")
    assert "hunter2" not in str(caught.value)


def test_parse_urls_from_argument_environment_and_default() -> None:
    assert [str(n) for n in parse_urls("http://a:1, http://b:2,")] == ["http://a:1",
                                                                      "http://b:2"]
    assert [str(n) for n in parse_urls(["http://a:1,http://b:2", "http://c:3"])] == [
        "http://a:1", "http://b:2", "http://c:3"]
    env = {ENV_VAR: "http://u:p@envhost:7"}
    assert parse_urls(None, env) == [Node("http://envhost:7", "u", "p")]
    assert parse_urls(None, {}) == [parse_url(DEFAULT_URL)]
    assert parse_urls(None, {}) == [Node("http://127.0.0.1:15672", "guest", "guest")]
    with pytest.raises(InvalidUrl):
        parse_urls(" , ")


def test_websocket_url_and_basic_auth() -> None:
    node = Node("https://h:1/p", "guest", "guest")
    assert node.ws_url("/") == "wss://h:1/p/ws?vhost=%2F"
    assert Node("http://h:1").ws_url("a b") == "ws://h:1/ws?vhost=a%20b"
    assert node.authorization == "Basic Z3Vlc3Q6Z3Vlc3Q="


def test_node_ring_tries_each_node_per_round_and_remembers_the_good_one() -> None:
    a, b, c = Node("http://a:1"), Node("http://b:1"), Node("http://c:1")
    ring = NodeRing([a, b, c], rounds=2, backoff_s=0.1)
    assert list(ring.attempts()) == [a, b, c, a, b, c]
    assert [ring.pause_after(i) for i in range(6)] == [0, 0, 0.1, 0, 0, 0]
    ring.failed(a)
    assert ring.current == b
    ring.failed(a)  # a stale failure does not move the ring again
    assert ring.current == b
    assert list(ring.attempts())[:3] == [b, c, a]


@pytest.mark.parametrize(("status", "kind"), [(400, BadRequest), (403, AccessRefused),
                                              (404, NotFound), (503, Unavailable),
                                              (418, LogbrokerError)])
def test_error_mapping(status: int, kind: type[LogbrokerError]) -> None:
    body = b'{"error": "x", "reason": "no queue \'q\' in vhost \'/\'", "field": "name"}'
    error = error_from_response(status, body)
    assert type(error) is kind
    assert (error.status, error.reason, error.field) == (status, "no queue 'q' in vhost '/'",
                                                         "name")
    assert str(error) == error.reason


def test_error_mapping_of_a_body_that_is_not_json() -> None:
    error = error_from_response(502, b"<html>Bad Gateway</html>")
    assert error.status == 502 and "Bad Gateway" in error.reason
    assert error_from_response(404, b"").reason == "HTTP 404"
    assert isinstance(error_for(401, "who?"), LogbrokerError)


def test_paths_encode_names_and_the_default_exchange() -> None:
    assert calls.declare_queue("/", "a/b c", True, False, None).path == \
        "/api/queues/%2F/a%2Fb%20c"
    assert calls.publish("/", "", OutgoingMessage("k", b"x")).path == \
        "/api/exchanges/%2F/amq.default/publish"
    assert calls.bind("v", "ex", "q", "queue", "k", None).path == "/api/bindings/v/e/ex/q/q"
    assert calls.delete_binding("/", "ex", "dest", "exchange", "a.%23").path == \
        "/api/bindings/%2F/e/ex/e/dest/a.%2523"
    assert not calls.publish_batch("/", "", []).idempotent
    assert calls.listing("queues", None).path == "/api/queues"
    assert calls.listing("connections", "/").path == "/api/connections"


def test_answer_checks_status_and_shape() -> None:
    call = calls.publish_batch("/", "", [OutgoingMessage("k", "a"), OutgoingMessage("k", "b")])
    ok = httpx.Response(200, json={"results": [{"routed": True, "confirmed": True},
                                               {"routed": False, "confirmed": False,
                                                "reason": "full"}]})
    results = calls.answer(ok, call)
    assert [(r.routed, r.confirmed, r.reason) for r in results] == [
        (True, True, ""), (False, False, "full")]
    with pytest.raises(ProtocolError):
        calls.answer(httpx.Response(200, json={"results": []}), call)
    with pytest.raises(NotFound):
        calls.answer(httpx.Response(404, json={"error": "not_found", "reason": "gone"}), call)


def test_binding_key_picks_routing_key_and_arguments() -> None:
    views = [{"routing_key": "k", "arguments": {}, "properties_key": "k"},
             {"routing_key": "k", "arguments": {"x": 1}, "properties_key": "k~abc"}]
    assert calls.binding_key(views, "k", {"x": 1}) == "k~abc"
    assert calls.binding_key(views, "k", None) == "k"
    with pytest.raises(NotFound):
        calls.binding_key(views, "other", None)


def test_bodies_round_trip_as_text_or_base64() -> None:
    assert encode_body(b"hi") == ("hi", "string")
    assert encode_body("h\u00e9") == ("h\u00e9", "string")
    assert encode_body(b"\xff\x00") == ("/wA=", "base64")
    assert decode_body("/wA=", "base64") == b"\xff\x00"
    assert decode_body("h\u00e9", "string") == "h\u00e9".encode()
    record = Record(3, 1000, "ex", "k", {}, b"\xff")
    assert record.to_json()["body_encoding"] == "base64"
    assert "body_encoding" not in Record(3, 1000, "ex", "k", {}, b"ok").to_json()


def _page(offsets: list[int], next_offset: int, end: int) -> ReplayPage:
    return ReplayPage([Record(o, 0, "", "", {}, b"") for o in offsets], next_offset, 0, end)


def test_replay_cursor_pages_until_the_end_or_to_offset() -> None:
    cursor = ReplayCursor(from_timestamp=5)
    assert cursor.call("/", "q", 2, 100).params == {"max_messages": 2, "max_bytes": 100,
                                                    "from_timestamp": 5}
    cursor.advance(_page([3, 4], 5, 8))
    assert (cursor.done, cursor.start_offset, cursor.total) == (False, 3, 5)
    assert cursor.call("/", "q", 2, 100).params == {"max_messages": 2, "max_bytes": 100,
                                                    "from_offset": 5}
    cursor.advance(_page([5, 6, 7], 8, 8))
    assert cursor.done
    bounded = ReplayCursor(from_offset=0, to_offset=2)
    bounded.advance(_page([0, 1], 2, 10))
    assert bounded.done and bounded.total == 2
    stalled = ReplayCursor(from_offset=4)
    stalled.advance(_page([], 4, 9))
    assert stalled.done
    with pytest.raises(ValueError):
        ReplayCursor()
