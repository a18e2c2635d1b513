"""The HTTP data plane against a running broker: publish, get, batches, leases, replay, metrics.

RabbitMQ-style publish and get (every ackmode, dead-lettering, base64 and
truncation), batch publish with per-message confirms and nacks, leases that
expire and redeliver, non-destructive replay pages, the Prometheus scrape, and
how bad requests are answered (400 naming the field, 401, 404, 413), with
/docs and /openapi.json. Every wait is bounded.
"""

from __future__ import annotations

import base64
import socket
import time
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import BrokerProcess, wait_for

MAX_BODY_BYTES = 64 * 1024 * 1024


def ok(response: httpx.Response, *statuses: int) -> httpx.Response:
    assert response.status_code in (statuses or (200,)), (response.status_code, response.text)
    return response


def declare(http: httpx.Client, name: str, **arguments: Any) -> None:
    ok(http.put(f"/api/queues/%2F/{name}", json={"arguments": arguments}), 201)


def publish(http: httpx.Client, routing_key: str, payload: str, exchange: str = "amq.default",
            **fields: Any) -> dict[str, Any]:
    body = {"routing_key": routing_key, "payload": payload, **fields}
    answer: dict[str, Any] = ok(http.post(f"/api/exchanges/%2F/{exchange}/publish",
                                          json=body)).json()
    return answer


def publish_batch(http: httpx.Client, routing_key: str, payloads: list[str]
                  ) -> list[dict[str, Any]]:
    messages = [{"routing_key": routing_key, "payload": p} for p in payloads]
    results: list[dict[str, Any]] = ok(http.post(
        "/api/exchanges/%2F/amq.default/publish-batch", json={"messages": messages}
    )).json()["results"]
    return results


def get(http: httpx.Client, queue: str, ackmode: str, count: int = 10, **fields: Any
        ) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = ok(http.post(
        f"/api/queues/%2F/{queue}/get", json={"count": count, "ackmode": ackmode, **fields}
    )).json()
    return messages


def lease(http: httpx.Client, queue: str, count: int, visibility_timeout_ms: int
          ) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = ok(http.post(
        f"/api/queues/%2F/{queue}/lease",
        json={"count": count, "visibility_timeout_ms": visibility_timeout_ms})).json()["messages"]
    return messages


def settle(http: httpx.Client, queue: str, verb: str, tags: list[int], requeue: bool = True
           ) -> dict[str, Any]:
    answer: dict[str, Any] = ok(http.post(f"/api/queues/%2F/{queue}/{verb}",
                                          json={"delivery_tags": tags, "requeue": requeue})).json()
    return answer


def queue_view(http: httpx.Client, name: str) -> dict[str, Any]:
    view: dict[str, Any] = ok(http.get(f"/api/queues/%2F/{name}")).json()
    return view


def test_publish_answers_routed_and_keeps_properties(http: httpx.Client) -> None:
    declare(http, "dp-pub")
    properties = {"content_type": "text/plain", "delivery_mode": 2, "message_id": "id-1",
                  "headers": {"k": 1, "nested": {"s": "v"}}, "timestamp": 1_700_000_000,
                  "priority": 3, "type": "greeting"}
    assert publish(http, "dp-pub", "hello", properties=properties) == {"routed": True,
                                                                       "confirmed": True}
    assert publish(http, "nobody", "lost", exchange="amq.direct") == {"routed": False,
                                                                      "confirmed": True}
    [message] = get(http, "dp-pub", "ack_requeue_false")
    assert (message["payload"], message["payload_encoding"]) == ("hello", "string")
    assert message["properties"] == properties
    assert (message["exchange"], message["routing_key"], message["redelivered"]) == (
        "", "dp-pub", False)
    unknown = http.post("/api/exchanges/%2F/no-such-x/publish", json={"payload": "x"})
    assert unknown.status_code == 404


def test_get_ackmodes(http: httpx.Client) -> None:
    declare(http, "dp-get")
    publish_batch(http, "dp-get", ["a", "b"])
    first = get(http, "dp-get", "ack_requeue_true")
    assert [(m["payload"], m["redelivered"], m["message_count"]) for m in first] == [
        ("a", False, 1), ("b", False, 0)]
    again = get(http, "dp-get", "reject_requeue_true")
    assert [(m["payload"], m["redelivered"]) for m in again] == [("a", True), ("b", True)]
    assert queue_view(http, "dp-get")["messages_ready"] == 2
    taken = get(http, "dp-get", "ack_requeue_false", count=1)
    assert [m["payload"] for m in taken] == ["a"]
    assert [m["payload"] for m in get(http, "dp-get", "ack_requeue_false")] == ["b"]
    assert get(http, "dp-get", "ack_requeue_false") == []
    view = queue_view(http, "dp-get")
    assert (view["messages_ready"], view["messages_unacknowledged"]) == (0, 0)


def test_get_reject_requeue_false_dead_letters(http: httpx.Client) -> None:
    ok(http.put("/api/exchanges/%2F/dp-dlx", json={"type": "fanout"}), 201)
    declare(http, "dp-dead")
    ok(http.post("/api/bindings/%2F/e/dp-dlx/q/dp-dead", json={}), 201)
    declare(http, "dp-live", **{"x-dead-letter-exchange": "dp-dlx"})
    publish(http, "dp-live", "doomed")
    [rejected] = get(http, "dp-live", "reject_requeue_false")
    assert rejected["payload"] == "doomed"
    dead = wait_for(lambda: get(http, "dp-dead", "ack_requeue_false"), "the dead letter")
    assert [m["payload"] for m in dead] == ["doomed"]
    [death] = dead[0]["properties"]["headers"]["x-death"]
    assert (death["queue"], death["reason"], death["count"]) == ("dp-live", "rejected", 1)
    assert queue_view(http, "dp-live")["messages"] == 0


def test_get_encodings_and_truncate(http: httpx.Client) -> None:
    declare(http, "dp-enc")
    binary = bytes([0, 1, 0xFE, 0xFF])
    publish(http, "dp-enc", base64.b64encode(binary).decode(), payload_encoding="base64")
    publish(http, "dp-enc", "hello world")
    [auto_binary, auto_text] = get(http, "dp-enc", "ack_requeue_true", encoding="auto")
    assert auto_binary["payload_encoding"] == "base64"
    assert base64.b64decode(auto_binary["payload"]) == binary
    assert (auto_text["payload"], auto_text["payload_encoding"]) == ("hello world", "string")
    [_, as_base64] = get(http, "dp-enc", "ack_requeue_true", encoding="base64")
    assert as_base64["payload_encoding"] == "base64"
    assert base64.b64decode(as_base64["payload"]) == b"hello world"
    [_, truncated] = get(http, "dp-enc", "ack_requeue_false", truncate=5)
    assert (truncated["payload"], truncated["payload_bytes"]) == ("hello", 11)


def test_publish_batch_answers_one_result_per_message(http: httpx.Client) -> None:
    declare(http, "dp-batch", **{"x-max-length": 2, "x-overflow": "reject-publish"})
    messages = [{"routing_key": "dp-batch", "payload": f"m{i}"} for i in range(4)]
    messages.append({"routing_key": "dp-nowhere", "payload": "unroutable"})
    results = ok(http.post("/api/exchanges/%2F/amq.default/publish-batch",
                           json={"messages": messages})).json()["results"]
    assert [(r["routed"], r["confirmed"]) for r in results] == [
        (True, True), (True, True), (True, False), (True, False), (False, True)]
    assert all(r["reason"] == "queue 'dp-batch' is full (x-overflow reject-publish)"
               for r in results[2:4]) and "reason" not in results[0]
    assert [m["payload"] for m in get(http, "dp-batch", "ack_requeue_false")] == ["m0", "m1"]
    declare(http, "dp-batch-order")
    payloads = [f"n{i}" for i in range(200)]
    assert all(r["confirmed"] for r in publish_batch(http, "dp-batch-order", payloads))
    page = ok(http.get("/api/queues/%2F/dp-batch-order/messages",
                       params={"from_offset": 0})).json()
    assert [m["payload"] for m in page["messages"]] == payloads


def test_leases_expire_and_redeliver(http: httpx.Client) -> None:
    declare(http, "dp-lease")
    publish_batch(http, "dp-lease", ["a", "b"])
    first = lease(http, "dp-lease", 2, visibility_timeout_ms=300)
    assert [(m["offset"], m["redelivered"]) for m in first] == [(0, False), (1, False)]
    again = wait_for(lambda: lease(http, "dp-lease", 2, visibility_timeout_ms=60_000),
                     "the expired leases to come back")
    assert [(m["offset"], m["redelivered"], m["payload"]) for m in again] == [
        (0, True, "a"), (1, True, "b")]
    old_tags = [m["delivery_tag"] for m in first]
    new_tags = [m["delivery_tag"] for m in again]
    assert settle(http, "dp-lease", "ack", old_tags) == {"settled": [], "unknown": old_tags}
    assert settle(http, "dp-lease", "ack", new_tags) == {"settled": new_tags, "unknown": []}
    assert settle(http, "dp-lease", "ack", new_tags)["unknown"] == new_tags
    view = queue_view(http, "dp-lease")
    assert (view["messages_ready"], view["messages_unacknowledged"]) == (0, 0)
    assert lease(http, "dp-lease", 1, visibility_timeout_ms=300) == []


def test_lease_nack_and_reject(http: httpx.Client) -> None:
    declare(http, "dp-nack")
    publish_batch(http, "dp-nack", ["a", "b"])
    [a, b] = lease(http, "dp-nack", 2, visibility_timeout_ms=60_000)
    assert lease(http, "dp-nack", 2, visibility_timeout_ms=60_000) == []  # both are out
    assert settle(http, "dp-nack", "nack", [a["delivery_tag"]])["settled"] == [a["delivery_tag"]]
    assert settle(http, "dp-nack", "reject", [b["delivery_tag"]], requeue=False)["settled"]
    [back] = lease(http, "dp-nack", 2, visibility_timeout_ms=60_000)
    assert (back["payload"], back["redelivered"]) == ("a", True)
    settle(http, "dp-nack", "ack", [back["delivery_tag"]])
    assert queue_view(http, "dp-nack")["messages"] == 0


def replay(http: httpx.Client, queue: str, **params: Any) -> dict[str, Any]:
    page: dict[str, Any] = ok(http.get(f"/api/queues/%2F/{queue}/messages",
                                       params=params)).json()
    return page


def test_replay_pages_chain_and_include_acked_messages(http: httpx.Client) -> None:
    declare(http, "dp-replay")
    publish_batch(http, "dp-replay", [f"m{i}" for i in range(6)])
    time.sleep(0.05)  # the second batch gets later timestamps
    publish_batch(http, "dp-replay", [f"m{i}" for i in range(6, 10)])
    assert len(get(http, "dp-replay", "ack_requeue_false")) == 10  # consumed and acked
    offsets: list[list[int]] = []
    page = {"next_offset": 0}
    while True:
        page = replay(http, "dp-replay", from_offset=page["next_offset"], max_messages=4)
        if not page["messages"]:
            break
        offsets.append([m["offset"] for m in page["messages"]])
        assert page["next_offset"] == offsets[-1][-1] + 1
    assert offsets == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert (page["next_offset"], page["first_offset"], page["end_offset"]) == (10, 0, 10)
    bounded = replay(http, "dp-replay", from_offset=2, to_offset=5)
    assert [m["payload"] for m in bounded["messages"]] == ["m2", "m3", "m4"]
    assert bounded["next_offset"] == 5
    full = replay(http, "dp-replay", from_offset=0)["messages"]
    later = replay(http, "dp-replay", from_timestamp=full[6]["timestamp"])
    assert full[5]["timestamp"] < full[6]["timestamp"]
    assert [m["offset"] for m in later["messages"]] == [6, 7, 8, 9]
    encoded = replay(http, "dp-replay", from_offset=9, encoding="base64")["messages"]
    assert base64.b64decode(encoded[0]["payload"]) == b"m9"
    both = http.get("/api/queues/%2F/dp-replay/messages",
                    params={"from_offset": 0, "from_timestamp": 0})
    assert (both.status_code, both.json()["field"]) == (400, "from_timestamp")


@pytest.mark.parametrize(("method", "path", "body", "field"), [
    ("PUT", "/api/queues/%2F/bad-q", {"durable": "maybe"}, "durable"),
    ("PUT", "/api/queues/%2F/bad-q", [1, 2], "body"),
    ("PUT", "/api/exchanges/%2F/bad-x", {"arguments": "none"}, "arguments"),
    ("POST", "/api/queues/%2F/bad-q/get", {"count": 0}, "count"),
    ("POST", "/api/queues/%2F/bad-q/get", {"ackmode": "keep"}, "ackmode"),
    ("POST", "/api/exchanges/%2F/amq.default/publish",
     {"payload": "x", "payload_encoding": "rot13"}, "payload_encoding"),
    ("POST", "/api/exchanges/%2F/amq.default/publish",
     {"payload": "!!", "payload_encoding": "base64"}, "payload"),
    ("POST", "/api/exchanges/%2F/amq.default/publish-batch",
     {"messages": [{"payload": "ok"}, {"properties": {"priority": 999}}]},
     "messages.1.properties.priority"),
    ("POST", "/api/queues/%2F/bad-q/lease", {"visibility_timeout_ms": 0},
     "visibility_timeout_ms"),
    ("POST", "/api/queues/%2F/bad-q/ack", {"delivery_tags": ["one"]}, "delivery_tags.0"),
    ("PUT", "/api/users/bad-user", {"password": 5}, "password"),
])
def test_schema_violations_answer_400_naming_the_field(
        http: httpx.Client, method: str, path: str, body: Any, field: str) -> None:
    ok(http.put("/api/queues/%2F/bad-q", json={}), 201, 204)
    answer = http.request(method, path, json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "bad_request"
    assert answer.json()["field"] == field


def test_unreadable_bodies_and_queries_answer_400(http: httpx.Client) -> None:
    not_json = http.put("/api/queues/%2F/bad-q", content=b"{nope",
                        headers={"content-type": "application/json"})
    assert (not_json.status_code, not_json.json()["field"]) == (400, "body")
    query = http.get("/api/queues/%2F/bad-q/messages", params={"max_messages": 0})
    assert query.status_code == 400 and query.json()["field"].endswith("max_messages")


@pytest.mark.parametrize("path", [
    "/api/vhosts/no-vhost", "/api/queues/no-vhost", "/api/queues/%2F/no-queue",
    "/api/exchanges/%2F/no-exchange", "/api/users/no-user", "/api/policies/%2F/no-policy",
    "/api/permissions/%2F/no-user", "/api/queues/%2F/no-queue/messages",
    "/api/bindings/%2F/e/amq.direct/q/no-queue", "/api/no-such-path",
])
def test_unknown_objects_answer_404(http: httpx.Client, path: str) -> None:
    answer = http.get(path)
    assert answer.status_code == 404
    assert answer.json()["error"] == "not_found"


def test_credentials_are_required(broker: BrokerProcess) -> None:
    anonymous = httpx.get(f"{broker.url}/api/overview", timeout=10.0)
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Basic")
    assert anonymous.json()["error"] == "not_authorised"
    wrong = httpx.get(f"{broker.url}/api/overview", auth=("guest", "nope"), timeout=10.0)
    assert wrong.status_code == 401
    batch = httpx.post(f"{broker.url}/api/exchanges/%2F/amq.default/publish-batch",
                       json={"messages": []}, timeout=10.0)
    assert batch.status_code == 401  # the data plane too


def test_docs_and_openapi_answer(http: httpx.Client) -> None:
    assert "swagger" in ok(http.get("/docs")).text.lower()
    spec = ok(http.get("/openapi.json")).json()
    assert "/api/queues/{vhost}/{name}" in spec["paths"]
    assert "/metrics" in spec["paths"]


def test_a_body_over_the_limit_answers_413(broker: BrokerProcess) -> None:
    """The limit is 64 MiB: a request claiming more is refused before its body is read."""
    request = (f"POST /api/exchanges/%2F/amq.default/publish HTTP/1.1\r\n"
               f"Host: 127.0.0.1\r\nAuthorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n"
               f"Content-Type: application/json\r\n"
               f"Content-Length: {MAX_BODY_BYTES + 1}\r\n\r\n{{").encode()
    with socket.create_connection(("127.0.0.1", broker.http_port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.split()[1] == b"413", answer
    assert b"payload_too_large" in rest


def scrape(broker: BrokerProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics, fetched without credentials, by (name, sorted labels)."""
    response = ok(httpx.get(f"{broker.url}/metrics", timeout=10.0))
    assert response.headers["content-type"].startswith("text/plain")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.text)
            for sample in family.samples}


def test_metrics_show_the_queues_and_the_node(http: httpx.Client, broker: BrokerProcess) -> None:
    declare(http, "dp-metrics")
    for i in range(3):
        publish(http, "dp-metrics", f"m{i}", properties={"delivery_mode": 2})
    [leased] = lease(http, "dp-metrics", 1, visibility_timeout_ms=60_000)
    settle(http, "dp-metrics", "nack", [leased["delivery_tag"]])  # back, to be redelivered
    [again] = lease(http, "dp-metrics", 1, visibility_timeout_ms=60_000)
    settle(http, "dp-metrics", "ack", [again["delivery_tag"]])
    lease(http, "dp-metrics", 1, visibility_timeout_ms=60_000)
    samples = scrape(broker)
    labels = (("queue", "dp-metrics"), ("vhost", "/"))
    expected = {"logbroker_queue_messages_ready": 1, "logbroker_queue_messages_unacked": 1,
                "logbroker_queue_consumers": 0, "logbroker_queue_published_total": 3,
                "logbroker_queue_delivered_total": 3, "logbroker_queue_acked_total": 1,
                "logbroker_queue_redelivered_total": 1}
    assert {name: samples[(name, labels)] for name in expected} == expected
    log_bytes = samples[("logbroker_queue_log_bytes", labels)]
    assert log_bytes == queue_view(http, "dp-metrics")["log_bytes"] > 0
    assert samples[("logbroker_fsync_seconds_count", ())] >= 1  # persistent messages
    assert samples[("logbroker_fsync_seconds_bucket", (("le", "+Inf"),))] == \
        samples[("logbroker_fsync_seconds_count", ())]
    assert samples[("logbroker_connections", (("protocol", "AMQP 0-9-1"),))] == 0
    assert samples[("logbroker_channels", ())] == 0
