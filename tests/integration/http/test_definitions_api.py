"""/api/definitions against a running broker: export, delete, import, export again; and a
document exported by RabbitMQ 3.12 loads (users' tags as a list or a comma string, keys
this broker ignores: parameters, global_parameters, topic_permissions)."""

from __future__ import annotations

import copy
from typing import Any

import httpx

from tests.integration.conftest import BrokerProcess

FULL = {"configure": ".*", "write": ".*", "read": ".*"}


def ok(response: httpx.Response, *statuses: int) -> httpx.Response:
    assert response.status_code in (statuses or (200,)), (response.status_code, response.text)
    return response


def create_definitions(http: httpx.Client) -> list[str]:
    """A vhost with one of everything; answers the paths that delete it again, in order."""
    steps: list[tuple[str, str, dict[str, Any]]] = [
        ("PUT", "/api/vhosts/defs", {"description": "round trip", "tags": "a,b"}),
        ("PUT", "/api/users/defs-user", {"password": "defs-pw", "tags": "management,policymaker"}),
        ("PUT", "/api/permissions/defs/defs-user", {"configure": "^defs", "write": ".*",
                                                    "read": ".*"}),
        ("PUT", "/api/permissions/defs/guest", FULL),
        ("PUT", "/api/policies/defs/defs-pol", {"pattern": "^defs-q", "apply-to": "queues",
                                                "definition": {"max-length": 10}, "priority": 2}),
        ("PUT", "/api/exchanges/defs/defs-topic",
         {"type": "topic", "arguments": {"alternate-exchange": "defs-fan"}}),
        ("PUT", "/api/exchanges/defs/defs-fan", {"type": "fanout", "internal": True}),
        ("PUT", "/api/queues/defs/defs-q1", {"arguments": {"x-message-ttl": 60_000}}),
        ("PUT", "/api/queues/defs/defs-q2", {"durable": True}),
        ("POST", "/api/bindings/defs/e/defs-topic/q/defs-q1",
         {"routing_key": "a.*", "arguments": {"x-k": "v"}}),
        ("POST", "/api/bindings/defs/e/defs-topic/e/defs-fan", {"routing_key": "b.#"}),
        ("POST", "/api/bindings/defs/e/defs-fan/q/defs-q2", {}),
    ]
    deletions = []
    for method, path, body in steps:
        answer = ok(http.request(method, path, json=body), 201)
        if method == "POST":
            deletions.append(f"{path}/{answer.headers['location']}")
    return [*reversed(deletions), "/api/queues/defs/defs-q1", "/api/queues/defs/defs-q2",
            "/api/exchanges/defs/defs-topic", "/api/exchanges/defs/defs-fan",
            "/api/policies/defs/defs-pol", "/api/permissions/defs/guest",
            "/api/permissions/defs/defs-user", "/api/users/defs-user", "/api/vhosts/defs"]


def mentions_defs(document: dict[str, Any]) -> list[Any]:
    return [entry for key in ("users", "vhosts", "permissions", "policies", "queues",
                              "exchanges", "bindings")
            for entry in document[key]
            if any(str(entry.get(k, "")).startswith("defs") for k in ("vhost", "name", "user"))]


def test_export_delete_import_export_is_identical(http: httpx.Client,
                                                  broker: BrokerProcess) -> None:
    deletions = create_definitions(http)
    exported = ok(http.get("/api/definitions")).json()
    assert len(mentions_defs(exported)) == 12  # everything create_definitions made
    assert {(b["source"], b["destination"]) for b in exported["bindings"]} == {
        ("defs-topic", "defs-q1"), ("defs-topic", "defs-fan"), ("defs-fan", "defs-q2")}
    for path in deletions:
        ok(http.delete(path), 204)
    assert mentions_defs(ok(http.get("/api/definitions")).json()) == []
    ok(http.post("/api/definitions", json=copy.deepcopy(exported)), 204)
    assert ok(http.get("/api/definitions")).json() == exported
    with httpx.Client(base_url=broker.url, auth=("defs-user", "defs-pw"), timeout=10) as user:
        assert ok(user.get("/api/whoami")).json()["tags"] == ["management", "policymaker"]
    ok(http.post("/api/definitions", json=exported), 204)  # importing again changes nothing
    assert ok(http.get("/api/definitions")).json() == exported


RABBITMQ_3_12_EXPORT: dict[str, Any] = {
    "rabbit_version": "3.12.13",
    "rabbitmq_version": "3.12.13",
    "product_name": "RabbitMQ",
    "product_version": "3.12.13",
    "users": [
        {"name": "rmq-admin", "password_hash": "Xu0eVVOde6IusXe5rJggVmCWstLMcT51en3O8BHeFyz7SBso",
         "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": ["administrator"],
         "limits": {}},
        {"name": "rmq-monitor",
         "password_hash": "obLD1Bi+YAIvDuYLrY4JhfchsKbUEKw/TFVGP9ZlxLuw95RN",
         "hashing_algorithm": "rabbit_password_hashing_sha256",
         "tags": "monitoring,management", "limits": {}},
        {"name": "rmq-app", "password_hash": "C63wDfRqegHJSj2XXiZd29m1PW0KMQjRNQHPc1jHPYjPs/fM",
         "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": [], "limits": {}},
        {"name": "rmq-legacy",
         "password_hash": "3q2+75+Xd8kQH9/UaAIRtO5OXz7rqJgnq1AQWFVVMoiFDUwlaQig3t3ZM0poadCATXXx"
                          "d8f0TW+9YLLBFsLiebNWL4Q=",
         "hashing_algorithm": "rabbit_password_hashing_sha512", "tags": "", "limits": {}},
    ],
    "vhosts": [
        {"name": "/", "description": "Default virtual host", "tags": [],
         "metadata": {"description": "Default virtual host", "tags": []},
         "default_queue_type": "classic"},
        {"name": "orders", "description": "Order pipeline", "tags": ["production"],
         "metadata": {"description": "Order pipeline", "tags": ["production"]},
         "default_queue_type": "classic"},
    ],
    "permissions": [
        {"user": "rmq-admin", "vhost": "orders", "configure": ".*", "write": ".*", "read": ".*"},
        {"user": "rmq-app", "vhost": "orders", "configure": "^$", "write": "^orders$",
         "read": "^orders\\."},
        {"user": "guest", "vhost": "orders", "configure": ".*", "write": ".*", "read": ".*"},
    ],
    "topic_permissions": [
        {"user": "rmq-app", "vhost": "orders", "exchange": "orders", "write": "^order\\.",
         "read": ".*"},
    ],
    "parameters": [
        {"value": {"max-connections": 500, "max-queues": 1000}, "vhost": "orders",
         "component": "vhost-limits", "name": "limits"},
        {"value": {"src-uri": "amqp://", "src-queue": "orders.created",
                   "dest-uri": "amqp://backup", "dest-queue": "orders.created"},
         "vhost": "orders", "component": "shovel", "name": "to-backup"},
    ],
    "global_parameters": [
        {"name": "cluster_name", "value": "rabbit@prod-mq-1"},
        {"name": "internal_cluster_id",
         "value": "rabbitmq-cluster-id-mMx0vY9gw0zUQp7BIg2p9A"},
    ],
    "policies": [
        {"vhost": "orders", "name": "orders-limits", "pattern": "^orders\\.",
         "apply-to": "queues", "priority": 0,
         "definition": {"max-length": 100000, "overflow": "reject-publish"}},
    ],
    "queues": [
        {"name": "orders.created", "vhost": "orders", "durable": True, "auto_delete": False,
         "arguments": {"x-queue-type": "classic", "x-dead-letter-exchange": "orders.dlx"}},
        {"name": "orders.audit", "vhost": "orders", "durable": True, "auto_delete": False,
         "arguments": {"x-queue-type": "quorum"}},
        {"name": "orders.dead", "vhost": "orders", "durable": True, "auto_delete": False,
         "arguments": {}},
    ],
    "exchanges": [
        {"name": "orders", "vhost": "orders", "type": "topic", "durable": True,
         "auto_delete": False, "internal": False, "arguments": {}},
        {"name": "orders.dlx", "vhost": "orders", "type": "fanout", "durable": True,
         "auto_delete": False, "internal": False, "arguments": {}},
    ],
    "bindings": [
        {"source": "orders", "vhost": "orders", "destination": "orders.created",
         "destination_type": "queue", "routing_key": "order.created.#", "arguments": {}},
        {"source": "orders", "vhost": "orders", "destination": "orders.audit",
         "destination_type": "queue", "routing_key": "#", "arguments": {}},
        {"source": "orders.dlx", "vhost": "orders", "destination": "orders.dead",
         "destination_type": "queue", "routing_key": "", "arguments": {}},
    ],
}


def test_a_rabbitmq_export_loads(http: httpx.Client, broker: BrokerProcess) -> None:
    ok(http.post("/api/definitions", json=RABBITMQ_3_12_EXPORT), 204)
    logins = {"rmq-admin": ("admin-pw", ["administrator"]),
              "rmq-monitor": ("monitor-pw", ["management", "monitoring"]),
              "rmq-legacy": ("old-pw", [])}
    for user, (password, tags) in logins.items():
        assert ok(http.get(f"/api/users/{user}")).json()["tags"] == tags
        with httpx.Client(base_url=broker.url, auth=(user, password), timeout=10) as client:
            whoami = client.get("/api/whoami")
            assert whoami.status_code == (200 if tags else 403), (user, whoami.text)
    vhost = ok(http.get("/api/vhosts/orders")).json()
    assert (vhost["description"], vhost["tags"]) == ("Order pipeline", ["production"])
    app = ok(http.get("/api/permissions/orders/rmq-app")).json()
    assert (app["write"], app["read"]) == ("^orders$", "^orders\\.")
    created = ok(http.get("/api/queues/orders/orders.created")).json()
    assert created["policy"] == "orders-limits"
    assert created["arguments"]["x-dead-letter-exchange"] == "orders.dlx"
    routed = ok(http.post("/api/exchanges/orders/orders/publish",
                          json={"routing_key": "order.created.eu", "payload": "o-1"})).json()
    assert routed == {"routed": True, "confirmed": True}
    assert ok(http.get("/api/queues/orders/orders.audit")).json()["messages_ready"] == 1
    ok(http.post("/api/queues/orders/orders.created/get",
                 json={"count": 1, "ackmode": "reject_requeue_false"}))
    dead = ok(http.get("/api/queues/orders/orders.dead/messages",
                       params={"from_offset": 0})).json()
    assert [m["payload"] for m in dead["messages"]] == ["o-1"]
    with httpx.Client(base_url=broker.url, auth=("rmq-app", "app-pw"), timeout=10) as app_client:
        allowed = app_client.post("/api/exchanges/orders/orders/publish-batch", json={
            "messages": [{"routing_key": "order.created.us", "payload": "o-2"}]})
        assert ok(allowed).json()["results"][0]["confirmed"] is True


def test_an_invalid_document_answers_400(http: httpx.Client) -> None:
    for document, where in (({"users": "everyone"}, "users"),
                            ({"queues": [{"vhost": "/"}]}, "queues[0]"),
                            ({"users": [{"name": "x", "password": "p", "tags": 3}]}, "users[0]"),
                            ({"exchanges": [{"name": "e", "vhost": "/", "type": "bogus"}]},
                             "unknown exchange type")):
        answer = http.post("/api/definitions", json=document)
        assert answer.status_code == 400, (document, answer.text)
        assert where.lower() in answer.json()["reason"].lower(), answer.text
    assert http.post("/api/definitions", json=[1]).status_code == 400


def test_a_document_with_one_bad_entry_is_refused_whole(http: httpx.Client) -> None:
    upstream = {"vhost": "atomic", "component": "federation-upstream", "name": "up",
                "value": {"uri": "amqp://127.0.0.1:1"}}
    good: dict[str, Any] = {
        "vhosts": [{"name": "atomic"}],
        "permissions": [{"user": "guest", "vhost": "atomic", **FULL}],
        "parameters": [upstream],
        "exchanges": [{"name": "atomic-x", "vhost": "atomic", "type": "topic"}],
        "queues": [{"name": "atomic-q", "vhost": "atomic", "durable": True}],
        "policies": [{"vhost": "atomic", "name": "fed", "pattern": "^atomic-x$",
                      "apply-to": "exchanges", "definition": {"federation-upstream": "up"}}],
    }
    bad_value = {**upstream, "value": {"uri": "amqp://127.0.0.1:1", "max-hops": "two"}}
    bad_uri = {**upstream, "value": {"uri": "http://127.0.0.1"}}
    unknown_set = {**good["policies"][0], "definition": {"federation-upstream-set": "nope"}}
    bad_type = {**good["policies"][0], "definition": {"max-length": "ten"}}
    for key, entry, named in (("parameters", bad_value, ("parameters[0] 'up'", "max-hops")),
                              ("parameters", bad_uri, ("parameters[0] 'up'", "'uri'")),
                              ("policies", unknown_set, ("policies[0] 'fed'",
                                                         "'federation-upstream-set'", "nope")),
                              ("policies", bad_type, ("policies[0] 'fed'", "ten"))):
        document = {**good, key: [entry]}
        answer = http.post("/api/definitions", json=document)
        assert answer.status_code == 400, (entry, answer.text)
        for part in named:
            assert part in answer.json()["reason"], (part, answer.text)
        assert http.get("/api/vhosts/atomic").status_code == 404  # nothing of it applied
    ok(http.post("/api/definitions", json=good), 204)
    assert ok(http.get("/api/queues/atomic/atomic-q")).json()["name"] == "atomic-q"
    assert ok(http.get("/api/policies/atomic/fed")).json()["definition"] == {
        "federation-upstream": "up"}
    ok(http.delete("/api/vhosts/atomic"), 204)
