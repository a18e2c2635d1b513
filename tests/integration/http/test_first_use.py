"""What a first user of the HTTP API meets: the OpenAPI docs without internet."""

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
