"""What a first user of the HTTP API meets: the OpenAPI docs without internet, JSON
bodies whose booleans and numbers must have their JSON types, and unknown query
parameters refused rather than ignored."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pika
import pytest

from tests.integration.conftest import BrokerProcess


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_every_asset_from_the_broker_itself(http: httpx.Client,
                                                            page: str) -> None:
    html = http.get(page)
    assert html.status_code == 200
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']|url: ?["']([^"']+)["']""", html.text)
    assets = [url for pair in urls for url in pair if url]
    assert assets
    assert "://" not in html.text.replace("http://www.w3.org", "")  # no other host at all
    kinds = set()
    for asset in assets:
        assert not urlsplit(asset).netloc, asset
        answer = http.get(asset)
        assert answer.status_code == 200, asset
        kinds.add(answer.headers["content-type"].split(";")[0])
    assert "text/javascript" in kinds or "application/javascript" in kinds


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/api/queues/%2F/strict-q", {"durable": "yes"}, "durable"),
    ("/api/queues/%2F/strict-q", {"auto_delete": 0}, "auto_delete"),
    ("/api/exchanges/%2F/strict-x", {"durable": "true"}, "durable"),
    ("/api/exchanges/%2F/strict-x", {"internal": 1}, "internal"),
    ("/api/policies/%2F/strict-p", {"pattern": "^s", "definition": {}, "priority": "1"},
     "priority"),
])
def test_booleans_and_numbers_must_have_their_json_types(http: httpx.Client, path: str,
                                                        body: dict[str, object],
                                                        field: str) -> None:
    answer = http.put(path, json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["field"] == field
    assert http.get(path).status_code == 404  # nothing was declared


def test_typed_bodies_still_declare(http: httpx.Client) -> None:
    assert http.put("/api/queues/%2F/typed-q", json={"durable": True, "auto_delete": False,
                                                      "arguments": {"x-max-length": 5}}
                    ).status_code in (201, 204)
    assert http.put("/api/exchanges/%2F/typed-x", json={"type": "topic", "durable": False}
                    ).status_code in (201, 204)


def test_an_unknown_query_parameter_is_refused_naming_it(http: httpx.Client) -> None:
    http.put("/api/queues/%2F/query-q", json={})
    answer = http.get("/api/queues/%2F/query-q/messages", params={"limit": 1})
    assert answer.status_code == 400
    assert answer.json()["field"] == "limit" and "'limit'" in answer.json()["reason"]
    assert http.get("/api/queues/%2F/query-q/messages",
                    params={"max_messages": 1}).status_code == 200
    assert http.get("/api/overview", params={"verbose": 1}).status_code == 400
    assert http.delete("/api/queues/%2F/query-q", params={"if_unused": "true"}
                       ).status_code == 400  # the parameter is if-unused
    assert http.get("/api/queues/%2F/query-q", params={"x": "1"}).status_code == 400


def test_list_routes_accept_rabbitmqs_list_parameters(http: httpx.Client) -> None:
    rabbitmq = {"columns": "name,messages", "page": "1", "page_size": "100", "name": "q",
                "use_regex": "false", "sort": "name", "sort_reverse": "false",
                "disable_stats": "true", "enable_queue_totals": "true"}
    for path in ("/api/queues", "/api/queues/%2F", "/api/exchanges", "/api/bindings",
                 "/api/vhosts", "/api/users", "/api/policies", "/api/connections",
                 "/api/consumers", "/api/nodes", "/api/permissions"):
        answer = http.get(path, params=rabbitmq)
        assert answer.status_code == 200, (path, answer.text)
        assert isinstance(answer.json(), list)


def test_serve_starts_without_a_deprecation_warning(broker: BrokerProcess) -> None:
    log = broker.log()
    assert "HTTP API on" in log
    assert "Warning" not in log, log


def test_the_readme_pika_example_runs_after_rabbitmqs_hello_tutorial(
        broker: BrokerProcess) -> None:
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    example = re.search(r"```python\n(import pika\n.*?)```", readme, re.S)
    assert example is not None
    parameters = f'pika.ConnectionParameters("127.0.0.1", {broker.amqp_port})'
    code = example.group(1).replace('pika.ConnectionParameters("localhost")', parameters)
    assert parameters in code
    tutorial = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", broker.amqp_port))
    tutorial.channel().queue_declare(queue="hello")  # "Hello World!": not durable
    tutorial.close()
    exec(compile(code, "README.md", "exec"), {})  # our own README
