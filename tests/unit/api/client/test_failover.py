"""Failover over REST with an httpx MockTransport standing in for the nodes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest

from api.client import AsyncClient, Client, ConnectionFailed, NotFound, OutgoingMessage

URLS = "http://guest:guest@a:1,http://bob:pw@b:2,http://guest:guest@c:3"
Handler = Callable[[httpx.Request], httpx.Response]


def nodes(down: set[str], log: list[str],
          error: type[httpx.TransportError] = httpx.ConnectError
          ) -> Handler:
    """Hosts in `down` fail with `error`; the others answer the overview / a publish."""
    def handle(request: httpx.Request) -> httpx.Response:
        log.append(f"{request.url.host} {request.method} {request.url.raw_path.decode()}")
        if request.url.host in down:
            raise error("node down", request=request)
        if request.url.path.endswith("/publish-batch"):
            return httpx.Response(200, json={"results": [{"routed": True, "confirmed": True}]})
        if request.url.path == "/api/queues/%2F/missing" or "missing" in request.url.path:
            return httpx.Response(404, json={"error": "not_found", "reason": "no queue"})
        return httpx.Response(200, json={"node": request.url.host,
                                         "auth": request.headers.get("authorization")})
    return handle


def client(handler: Handler) -> Client:
    return Client(URLS, transport=httpx.MockTransport(handler), backoff_s=0.0)


def test_moves_to_the_next_node_and_stays_there() -> None:
    log: list[str] = []
    with client(nodes({"a"}, log)) as c:
        answer = c.overview()
        assert answer["node"] == "b"
        assert answer["auth"] == "Basic Ym9iOnB3"  # each node's own credentials
        c.overview()
    assert [entry.split()[0] for entry in log] == ["a", "b", "b"]


def test_vhost_slash_is_percent_encoded_on_the_wire() -> None:
    log: list[str] = []
    with client(nodes(set(), log)) as c:
        c.declare_queue("q/1")
    assert log == ["a PUT /api/queues/%2F/q%2F1"]


def test_an_http_error_is_not_a_reason_to_fail_over() -> None:
    log: list[str] = []
    with client(nodes(set(), log)) as c, pytest.raises(NotFound):
        c.purge("missing")
    assert len(log) == 1


def test_gives_up_after_bounded_rounds() -> None:
    log: list[str] = []
    with client(nodes({"a", "b", "c"}, log)) as c, pytest.raises(ConnectionFailed) as caught:
        c.list_queues()
    assert [entry.split()[0] for entry in log] == ["a", "b", "c", "a", "b", "c"]
    assert "cannot connect to any node" in str(caught.value)
    assert "pw" not in str(caught.value)


def test_publish_is_retried_elsewhere_only_if_it_was_never_sent() -> None:
    log: list[str] = []
    with client(nodes({"a"}, log, httpx.ConnectError)) as c:
        assert c.publish_batch("", [b"x"], routing_key="q")[0].confirmed
    assert [entry.split()[0] for entry in log] == ["a", "b"]
    log.clear()
    with client(nodes({"a"}, log, httpx.ReadError)) as c, \
            pytest.raises(ConnectionFailed, match="outcome is unknown"):
        c.publish_batch("", [OutgoingMessage("q", b"x")])
    assert [entry.split()[0] for entry in log] == ["a"]


def test_idempotent_requests_are_retried_after_a_lost_answer() -> None:
    log: list[str] = []
    with client(nodes({"a"}, log, httpx.ReadError)) as c:
        assert c.overview()["node"] == "b"


async def test_async_client_fails_over_the_same_way() -> None:
    log: list[str] = []
    transport = httpx.MockTransport(nodes({"a", "b"}, log))
    async with AsyncClient(URLS, transport=transport, backoff_s=0.0) as c:
        assert (await c.overview())["node"] == "c"
        statuses = await c.status()
    assert [(s.url, s.up) for s in statuses] == [("http://a:1", False), ("http://b:2", False),
                                                 ("http://c:3", True)]
    assert [entry.split()[0] for entry in log] == ["a", "b", "c", "a", "b", "c"]


def _replay_led_by_c(log: list[str]) -> Handler:
    """Node a has no copy of queue rq: it answers 421 naming c, which serves the page."""
    def handle(request: httpx.Request) -> httpx.Response:
        log.append(f"{request.url.host}:{request.url.port} {request.headers['authorization']}")
        if request.url.host == "a":
            return httpx.Response(421, headers={"X-Queue-Leader-Url": "http://c:3"}, json={
                "error": "error", "reason": "queue 'rq' in vhost '/' is led by node 'n3'"})
        return httpx.Response(200, json={
            "messages": [{"offset": 0, "timestamp": 1, "exchange": "", "routing_key": "rq",
                          "properties": {}, "payload": "hi", "payload_encoding": "string"}],
            "next_offset": 1, "first_offset": 0, "end_offset": 1})
    return handle


def test_a_replay_follows_421_to_the_queue_leader_with_the_same_credentials() -> None:
    log: list[str] = []
    with client(_replay_led_by_c(log)) as c:
        records = list(c.replay("rq", from_offset=0))
    assert [record.body for record in records] == [b"hi"]
    assert log == ["a:1 Basic Z3Vlc3Q6Z3Vlc3Q=", "c:3 Basic Z3Vlc3Q6Z3Vlc3Q="]


def test_the_async_replay_follows_421_too() -> None:
    log: list[str] = []

    async def run() -> list[bytes]:
        async with AsyncClient(URLS, transport=httpx.MockTransport(_replay_led_by_c(log)),
                               backoff_s=0.0) as c:
            return [record.body async for record in c.replay("rq", from_offset=0)]
    assert asyncio.run(run()) == [b"hi"]
    assert [entry.split()[0] for entry in log] == ["a:1", "c:3"]


def test_a_421_is_followed_once_only() -> None:
    log: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        log.append(str(request.url.host))
        return httpx.Response(421, headers={"X-Queue-Leader-Url": "http://b:2"},
                              json={"error": "error", "reason": "led elsewhere"})
    with client(handle) as c, pytest.raises(Exception, match="led elsewhere"):
        list(c.replay("rq", from_offset=0))
    assert log == ["a", "b"]
