"""The management API (docs/http-api.md) against a running `logbroker serve` process.

Overview, nodes, connections and consumers (seen through a real pika client),
vhosts, users and their tags, permissions and their enforcement, exchanges,
queues, bindings and policies. Definitions export / import live in
test_definitions_api.py; the data plane and error answers in
test_data_plane_api.py. Each test
uses its own names, so tests share the module's broker without meeting.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import httpx
import pika

from tests.integration.conftest import BrokerProcess, wait_for

FULL = {"configure": ".*", "write": ".*", "read": ".*"}


@contextmanager
def client_as(broker: BrokerProcess, user: str, password: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=broker.url, auth=(user, password), timeout=10.0) as client:
        yield client


def ok(response: httpx.Response, *statuses: int) -> httpx.Response:
    assert response.status_code in (statuses or (200,)), (response.status_code, response.text)
    return response


def add_user(http: httpx.Client, name: str, tags: str | list[str],
             permissions: dict[str, dict[str, str]]) -> str:
    """A user with password `<name>-pw`, `tags`, and permissions per vhost."""
    ok(http.put(f"/api/users/{name}", json={"password": f"{name}-pw", "tags": tags}), 201, 204)
    for vhost, grant in permissions.items():
        ok(http.put(f"/api/permissions/{quote(vhost, safe='')}/{name}", json=grant), 201, 204)
    return f"{name}-pw"


def publish(http: httpx.Client, routing_key: str, payload: str, exchange: str = "amq.default",
            vhost: str = "%2F") -> dict[str, Any]:
    body = {"routing_key": routing_key, "payload": payload, "payload_encoding": "string",
            "properties": {"delivery_mode": 2}}
    answer: dict[str, Any] = ok(http.post(f"/api/exchanges/{vhost}/{exchange}/publish",
                                          json=body)).json()
    return answer


def queue(http: httpx.Client, name: str, vhost: str = "%2F") -> dict[str, Any]:
    view: dict[str, Any] = ok(http.get(f"/api/queues/{vhost}/{name}")).json()
    return view


def test_overview_whoami_and_nodes(http: httpx.Client, broker: BrokerProcess) -> None:
    overview = ok(http.get("/api/overview")).json()
    ports = {listener["protocol"]: listener["port"] for listener in overview["listeners"]}
    assert ports == {"amqp": broker.amqp_port, "http": broker.http_port}
    assert set(overview["queue_totals"]) >= {"messages", "messages_ready",
                                             "messages_unacknowledged"}
    assert overview["object_totals"]["connections"] >= 0
    assert ok(http.get("/api/whoami")).json() == {"name": "guest", "tags": ["administrator"]}
    nodes = ok(http.get("/api/nodes")).json()
    assert [node["name"] for node in nodes] == [overview["node"]]
    node = ok(http.get(f"/api/nodes/{quote(overview['node'], safe='')}")).json()
    assert node["running"] is True and node["uptime"] >= 0
    assert http.get("/api/nodes/rabbit@nowhere").status_code == 404


def amqp_connection(broker: BrokerProcess) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=broker.amqp_port,
        credentials=pika.PlainCredentials("guest", "guest"),
        socket_timeout=5, blocked_connection_timeout=5, connection_attempts=1))


def test_connections_and_consumers_show_an_amqp_client(http: httpx.Client,
                                                       broker: BrokerProcess) -> None:
    ok(http.put("/api/queues/%2F/conn-q", json={}), 201)
    connection = amqp_connection(broker)
    try:
        channel = connection.channel()
        channel.basic_qos(prefetch_count=7)
        channel.basic_consume("conn-q", lambda *_: None, consumer_tag="conn-ctag")

        def amqp_connections() -> list[dict[str, Any]]:
            return [c for c in ok(http.get("/api/connections")).json()
                    if c["protocol"] == "AMQP 0-9-1"]

        listed = wait_for(amqp_connections, "the AMQP connection to be listed")
        assert listed[0]["user"] == "guest" and listed[0]["vhost"] == "/"
        assert listed[0]["channels"] == 1 and listed[0]["peer_host"] == "127.0.0.1"
        consumers = [c for c in ok(http.get("/api/consumers")).json()
                     if c["consumer_tag"] == "conn-ctag"]
        assert consumers == [{
            "consumer_tag": "conn-ctag", "queue": {"name": "conn-q", "vhost": "/"},
            "channel_details": consumers[0]["channel_details"], "ack_required": True,
            "exclusive": False, "prefetch_count": 7, "active": True, "arguments": {}}]
        assert queue(http, "conn-q")["consumers"] == 1
    finally:
        connection.close()
    wait_for(lambda: not any(c["protocol"] == "AMQP 0-9-1"
                             for c in ok(http.get("/api/connections")).json()),
             "the closed connection to leave the list")
    assert queue(http, "conn-q")["consumers"] == 0
    ok(http.delete("/api/queues/%2F/conn-q"), 204)


def test_vhosts_put_get_delete(http: httpx.Client) -> None:
    assert ok(http.put("/api/vhosts/vh-a", json={"description": "first", "tags": "b,a"}),
              201).text == ""
    ok(http.put("/api/vhosts/vh-a", json={"description": "second", "tags": ["a", "b"]}), 204)
    view = ok(http.get("/api/vhosts/vh-a")).json()
    assert (view["name"], view["description"], view["tags"]) == ("vh-a", "second", ["a", "b"])
    assert {"/", "vh-a"} <= {v["name"] for v in ok(http.get("/api/vhosts")).json()}
    ok(http.put("/api/permissions/vh-a/guest", json=FULL), 201)
    ok(http.put("/api/queues/vh-a/in-a", json={}), 201)
    publish(http, "in-a", "x", vhost="vh-a")
    assert ok(http.get("/api/vhosts/vh-a")).json()["messages"] == 1
    ok(http.delete("/api/vhosts/vh-a"), 204)
    assert http.get("/api/vhosts/vh-a").status_code == 404
    assert http.get("/api/queues/vh-a/in-a").status_code == 404
    assert http.delete("/api/vhosts/vh-a").status_code == 404
    ok(http.put("/api/vhosts/vh-a"), 201)  # no body at all is fine too
    assert ok(http.get("/api/vhosts/vh-a")).json()["messages"] == 0  # the queue is gone
    ok(http.delete("/api/vhosts/vh-a"), 204)


def test_users_and_their_tags(http: httpx.Client, broker: BrokerProcess) -> None:
    for vhost in ("tag-seen", "tag-hidden"):
        ok(http.put(f"/api/vhosts/{vhost}", json={}), 201)
        ok(http.put(f"/api/permissions/{vhost}/guest", json=FULL), 201)
        ok(http.put(f"/api/queues/{vhost}/q-{vhost}", json={}), 201)
    plain = add_user(http, "u-plain", "", {"/": FULL})
    mgmt = add_user(http, "u-mgmt", "management", {"tag-seen": FULL})
    mon = add_user(http, "u-mon", ["monitoring"], {})
    with client_as(broker, "u-plain", plain) as client:
        assert client.get("/api/queues").status_code == 403
        assert client.get("/api/whoami").status_code == 403
        batch = {"messages": [{"routing_key": "nowhere", "payload": "x"}]}  # data plane: no tag
        assert ok(client.post("/api/exchanges/%2F/amq.default/publish-batch", json=batch)).json()
    with client_as(broker, "u-mgmt", mgmt) as client:
        assert ok(client.get("/api/whoami")).json() == {"name": "u-mgmt", "tags": ["management"]}
        assert [v["name"] for v in ok(client.get("/api/vhosts")).json()] == ["tag-seen"]
        assert {q["vhost"] for q in ok(client.get("/api/queues")).json()} == {"tag-seen"}
        assert client.get("/api/queues/tag-hidden").status_code == 403
        assert client.get("/api/nodes").status_code == 403
        assert client.get("/api/users").status_code == 403
    with client_as(broker, "u-mon", mon) as client:
        seen = {v["name"] for v in ok(client.get("/api/vhosts")).json()}
        assert {"/", "tag-seen", "tag-hidden"} <= seen
        assert "q-tag-hidden" in {q["name"] for q in ok(client.get("/api/queues")).json()}
        ok(client.get("/api/nodes"))
        assert client.get("/api/users").status_code == 403  # administrator only
    user = ok(http.get("/api/users/u-mgmt")).json()
    assert user["tags"] == ["management"] and user["password_hash"] != mgmt
    assert user["hashing_algorithm"] == "rabbit_password_hashing_sha256"
    assert "u-mon" in {u["name"] for u in ok(http.get("/api/users")).json()}
    ok(http.put("/api/users/u-mgmt", json={"tags": "management,policymaker"}), 204)
    with client_as(broker, "u-mgmt", mgmt) as client:  # the password is kept
        assert ok(client.get("/api/whoami")).json()["tags"] == ["management", "policymaker"]
    with client_as(broker, "u-mgmt", "wrong") as client:
        assert client.get("/api/whoami").status_code == 401
    assert http.put("/api/users/u-new", json={"tags": ""}).json()["field"] == "password"
    for name in ("u-plain", "u-mgmt", "u-mon"):
        ok(http.delete(f"/api/users/{name}"), 204)
    assert http.get("/api/users/u-mgmt").status_code == 404
    with client_as(broker, "u-mon", mon) as client:
        assert client.get("/api/whoami").status_code == 401
    for vhost in ("tag-seen", "tag-hidden"):
        ok(http.delete(f"/api/vhosts/{vhost}"), 204)


def test_permissions_put_get_delete_and_enforce(http: httpx.Client,
                                                broker: BrokerProcess) -> None:
    read_only = {"configure": "^$", "write": "^$", "read": ".*"}
    password = add_user(http, "u-ro", "management", {})
    ok(http.put("/api/permissions/%2F/u-ro", json=read_only), 201)
    ok(http.put("/api/permissions/%2F/u-ro", json=read_only), 204)
    expected = {"user": "u-ro", "vhost": "/", **read_only}
    assert ok(http.get("/api/permissions/%2F/u-ro")).json() == expected
    assert expected in ok(http.get("/api/permissions")).json()
    assert ok(http.get("/api/users/u-ro/permissions")).json() == [expected]
    assert expected in ok(http.get("/api/vhosts/%2F/permissions")).json()
    ok(http.put("/api/queues/%2F/perm-q", json={}), 201)
    publish(http, "perm-q", "readable")
    with client_as(broker, "u-ro", password) as client:
        assert client.put("/api/queues/%2F/perm-q2", json={}).status_code == 403
        assert client.delete("/api/queues/%2F/perm-q").status_code == 403
        refused = client.post("/api/exchanges/%2F/amq.default/publish",
                              json={"routing_key": "perm-q", "payload": "no"})
        assert refused.status_code == 403
        got = ok(client.post("/api/queues/%2F/perm-q/get",
                             json={"count": 1, "ackmode": "ack_requeue_false"})).json()
        assert [m["payload"] for m in got] == ["readable"]
    ok(http.delete("/api/permissions/%2F/u-ro"), 204)
    assert http.get("/api/permissions/%2F/u-ro").status_code == 404
    assert http.delete("/api/permissions/%2F/u-ro").status_code == 404
    with client_as(broker, "u-ro", password) as client:
        assert client.get("/api/queues/%2F").status_code == 403
    assert http.put("/api/permissions/%2F/nobody", json=read_only).status_code == 404
    assert http.put("/api/permissions/no-vhost/u-ro", json=read_only).status_code == 404
    missing = http.put("/api/permissions/%2F/u-ro", json={"configure": "", "write": ""})
    assert (missing.status_code, missing.json()["field"]) == (400, "read")
    ok(http.delete("/api/users/u-ro"), 204)
    ok(http.delete("/api/queues/%2F/perm-q"), 204)


def test_exchanges_put_get_delete(http: httpx.Client) -> None:
    body = {"type": "topic", "durable": True, "arguments": {"alternate-exchange": "ex-ae"}}
    ok(http.put("/api/exchanges/%2F/ex-t", json=body), 201)
    ok(http.put("/api/exchanges/%2F/ex-t", json=body), 204)
    inequivalent = http.put("/api/exchanges/%2F/ex-t", json={"type": "fanout"})
    assert inequivalent.status_code == 400 and "inequivalent" in inequivalent.json()["reason"]
    view = ok(http.get("/api/exchanges/%2F/ex-t")).json()
    assert (view["type"], view["durable"], view["arguments"]) == (
        "topic", True, {"alternate-exchange": "ex-ae"})
    assert "ex-t" in {e["name"] for e in ok(http.get("/api/exchanges/%2F")).json()}
    assert "ex-t" in {e["name"] for e in ok(http.get("/api/exchanges")).json()}
    default = ok(http.get("/api/exchanges/%2F/amq.default")).json()
    assert (default["name"], default["type"]) == ("", "direct")
    listed = ok(http.get("/api/exchanges")).json()
    assert "" in {e["name"] for e in listed}
    assert ok(http.get("/api/overview")).json()["object_totals"]["exchanges"] == len(listed)
    ok(http.put("/api/queues/%2F/ex-q", json={}), 201)
    ok(http.post("/api/bindings/%2F/e/ex-t/q/ex-q", json={"routing_key": "#"}), 201)
    assert http.delete("/api/exchanges/%2F/ex-t?if-unused=true").status_code == 400
    ok(http.delete("/api/queues/%2F/ex-q"), 204)  # takes its binding along
    ok(http.delete("/api/exchanges/%2F/ex-t?if-unused=true"), 204)
    assert http.get("/api/exchanges/%2F/ex-t").status_code == 404
    assert http.delete("/api/exchanges/%2F/ex-t").status_code == 404
    assert http.delete("/api/exchanges/%2F/amq.direct").status_code == 403
    assert http.put("/api/exchanges/%2F/amq.default", json={}).status_code == 403
    assert http.put("/api/exchanges/%2F/ex-bad", json={"type": "nonsense"}).status_code == 400


def test_queues_put_get_purge_delete(http: httpx.Client) -> None:
    node = ok(http.get("/api/overview")).json()["node"]
    ok(http.put("/api/queues/%2F/qs", json={"arguments": {"x-max-length": 100}}), 201)
    ok(http.put("/api/queues/%2F/qs", json={"arguments": {"x-max-length": 100}}), 204)
    assert http.put("/api/queues/%2F/qs", json={"durable": False}).status_code == 400
    empty = queue(http, "qs")
    assert (empty["node"], empty["leader"], empty["members"]) == (node, node, [node])
    assert (empty["first_offset"], empty["next_offset"], empty["messages"]) == (0, 0, 0)
    for i in range(3):
        assert publish(http, "qs", f"m{i}") == {"routed": True, "confirmed": True}
    leased = ok(http.post("/api/queues/%2F/qs/lease",
                          json={"count": 1, "visibility_timeout_ms": 60_000})).json()
    view = queue(http, "qs")
    assert (view["messages_ready"], view["messages_unacknowledged"], view["messages"]) == (2, 1, 3)
    assert (view["first_offset"], view["next_offset"]) == (0, 3)
    assert view["log_bytes"] > 0 and view["message_stats"]["publish"] == 3
    assert "qs" in {q["name"] for q in ok(http.get("/api/queues/%2F")).json()}
    assert http.delete("/api/queues/%2F/qs?if-empty=true").status_code == 400
    ok(http.delete("/api/queues/%2F/qs/contents"), 204)
    purged = queue(http, "qs")
    assert (purged["messages_ready"], purged["messages_unacknowledged"]) == (0, 1)
    assert purged["next_offset"] == 3  # purge drops messages, not the log's offsets
    tags = [m["delivery_tag"] for m in leased["messages"]]
    ok(http.post("/api/queues/%2F/qs/ack", json={"delivery_tags": tags}))
    assert queue(http, "qs")["messages_unacknowledged"] == 0
    ok(http.delete("/api/queues/%2F/qs?if-empty=true"), 204)
    assert http.get("/api/queues/%2F/qs").status_code == 404
    assert http.delete("/api/queues/%2F/qs").status_code == 404
    assert http.put("/api/queues/%2F/amq.mine", json={}).status_code == 403


def test_bindings_post_list_get_delete(http: httpx.Client) -> None:
    ok(http.put("/api/exchanges/%2F/b-src", json={"type": "topic"}), 201)
    ok(http.put("/api/exchanges/%2F/b-dst", json={"type": "fanout"}), 201)
    for name in ("b-q", "b-q2"):
        ok(http.put(f"/api/queues/%2F/{name}", json={}), 201)
    ok(http.post("/api/bindings/%2F/e/b-dst/q/b-q2", json={}), 201)
    to_queue = ok(http.post("/api/bindings/%2F/e/b-src/q/b-q",
                            json={"routing_key": "a.#", "arguments": {"x-note": "n"}}), 201)
    to_exchange = ok(http.post("/api/bindings/%2F/e/b-src/e/b-dst",
                               json={"routing_key": "r/k"}), 201)
    assert to_exchange.headers["location"] == "r%2Fk"
    queue_key = to_queue.headers["location"]
    assert queue_key.startswith("a.%23~")
    between = ok(http.get("/api/bindings/%2F/e/b-src/q/b-q")).json()
    assert [(b["routing_key"], b["arguments"]) for b in between] == [("a.#", {"x-note": "n"})]
    listed = {(b["source"], b["destination"], b["routing_key"])
              for b in ok(http.get("/api/bindings/%2F")).json()}
    assert {("b-src", "b-q", "a.#"), ("b-src", "b-dst", "r/k"), ("", "b-q", "b-q")} <= listed
    assert len(ok(http.get("/api/bindings")).json()) >= len(listed)
    of_queue = ok(http.get("/api/queues/%2F/b-q/bindings")).json()
    assert [(b["source"], b["routing_key"]) for b in of_queue] == [("", "b-q"), ("b-src", "a.#")]
    got = ok(http.get(f"/api/bindings/%2F/e/b-src/q/b-q/{queue_key}")).json()
    assert (got["destination_type"], got["properties_key"]) == ("queue", queue_key)
    got = ok(http.get("/api/bindings/%2F/e/b-src/e/b-dst/r%2Fk")).json()
    assert (got["destination_type"], got["routing_key"]) == ("exchange", "r/k")
    assert publish(http, "a.b", "via e->q", exchange="b-src")["routed"] is True
    assert publish(http, "r/k", "via e->e", exchange="b-src")["routed"] is True
    assert queue(http, "b-q2")["messages_ready"] == 1
    ok(http.delete("/api/bindings/%2F/e/b-src/e/b-dst/r%2Fk"), 204)
    ok(http.delete(f"/api/bindings/%2F/e/b-src/q/b-q/{queue_key}"), 204)
    assert http.get(f"/api/bindings/%2F/e/b-src/q/b-q/{queue_key}").status_code == 404
    assert publish(http, "r/k", "nowhere now", exchange="b-src")["routed"] is False
    assert http.post("/api/bindings/%2F/e/b-src/q/no-such-q", json={}).status_code == 404
    assert http.post("/api/bindings/%2F/e/amq.default/q/b-q", json={}).status_code == 403
    for path in ("queues/%2F/b-q", "queues/%2F/b-q2", "exchanges/%2F/b-src",
                 "exchanges/%2F/b-dst"):
        ok(http.delete(f"/api/{path}"), 204)


def test_policies_put_get_delete_and_enforce(http: httpx.Client, broker: BrokerProcess) -> None:
    ok(http.put("/api/queues/%2F/pol.q", json={}), 201)
    body = {"pattern": "^pol\\.", "definition": {"max-length": 2}, "apply-to": "queues",
            "priority": 1}
    ok(http.put("/api/policies/%2F/pol-ml", json=body), 201)
    ok(http.put("/api/policies/%2F/pol-ml", json=body), 204)
    expected = {"vhost": "/", "name": "pol-ml", **body}
    assert ok(http.get("/api/policies/%2F/pol-ml")).json() == expected
    assert expected in ok(http.get("/api/policies/%2F")).json()
    assert expected in ok(http.get("/api/policies")).json()
    view = queue(http, "pol.q")
    assert (view["policy"], view["effective_policy_definition"]) == ("pol-ml", {"max-length": 2})
    for i in range(5):
        publish(http, "pol.q", f"m{i}")
    wait_for(lambda: queue(http, "pol.q")["messages_ready"] == 2, "max-length to drop the head")
    got = ok(http.post("/api/queues/%2F/pol.q/get",
                       json={"count": 10, "ackmode": "ack_requeue_false"})).json()
    assert [m["payload"] for m in got] == ["m3", "m4"]
    password = add_user(http, "u-nopol", "management", {"/": FULL})
    with client_as(broker, "u-nopol", password) as client:  # needs policymaker
        assert client.put("/api/policies/%2F/pol-x", json=body).status_code == 403
    bad = http.put("/api/policies/%2F/pol-bad", json={**body, "priority": "high"})
    assert (bad.status_code, bad.json()["field"]) == (400, "priority")
    ok(http.delete("/api/policies/%2F/pol-ml"), 204)
    assert http.get("/api/policies/%2F/pol-ml").status_code == 404
    assert http.delete("/api/policies/%2F/pol-ml").status_code == 404
    assert queue(http, "pol.q")["policy"] is None
    for i in range(3):
        publish(http, "pol.q", f"n{i}")
    assert queue(http, "pol.q")["messages_ready"] == 3  # no longer limited
    ok(http.delete("/api/users/u-nopol"), 204)
    ok(http.delete("/api/queues/%2F/pol.q"), 204)
