"""What a first user of the HTTP API meets: the OpenAPI docs without internet, JSON
bodies whose booleans and numbers must have their JSON types."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import httpx
import pytest


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
