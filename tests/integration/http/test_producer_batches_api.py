"""Transactional batch publish against a running broker: stage, commit, abort, refusals.

A batch's listed parts become routable together, once: a commit sent twice
publishes nothing the second time, a part left out (a failed task attempt's)
is discarded, an aborted or unknown part is refused, and a broker killed with
SIGKILL between stage and commit keeps both what was staged (in the batch's
durable staging queue) and what was committed.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import BrokerProcess, start_broker

BASE = "/api/producers/%2F"


def ok(response: httpx.Response, *statuses: int) -> Any:
    assert response.status_code in (statuses or (200,)), (response.status_code, response.text)
    return response.json() if response.content else None


def declare(http: httpx.Client, name: str) -> None:
    ok(http.put(f"/api/queues/%2F/{name}", json={}), 201, 204)


def stage(http: httpx.Client, producer: str, seq: int, queue: str, payloads: list[str],
          exchange: str = "") -> str:
    messages = [{"routing_key": queue, "payload": p} for p in payloads]
    answer = ok(http.post(f"{BASE}/{producer}/batches/{seq}/parts",
                          json={"exchange": exchange, "messages": messages}), 201)
    assert answer["messages"] == len(payloads)
    part: str = answer["part"]
    return part


def commit(http: httpx.Client, producer: str, seq: int, parts: list[str],
           status: int = 200) -> Any:
    return ok(http.post(f"{BASE}/{producer}/batches/{seq}/commit", json={"parts": parts}),
              status)


def replay(http: httpx.Client, queue: str) -> list[dict[str, Any]]:
    page = ok(http.get(f"/api/queues/%2F/{queue}/messages", params={"from_offset": 0}))
    messages: list[dict[str, Any]] = page["messages"]
    return messages


def payloads(http: httpx.Client, queue: str) -> list[str]:
    return [m["payload"] for m in replay(http, queue)]


def test_a_committed_batch_is_published_once_in_part_order(http: httpx.Client) -> None:
    declare(http, "tx-once")
    first = stage(http, "p-once", 0, "tx-once", ["a", "b"])
    second = stage(http, "p-once", 0, "tx-once", ["c"])
    assert payloads(http, "tx-once") == []  # staged rows are not routable
    answer = commit(http, "p-once", 0, [second, first])
    assert answer == {"producer": "p-once", "seq": 0, "committed": True, "duplicate": False,
                      "messages": 3, "unroutable": 0, "refused": 0}
    assert payloads(http, "tx-once") == ["c", "a", "b"]
    again = commit(http, "p-once", 0, [second, first])
    assert again["duplicate"] is True and again["messages"] == 0
    assert payloads(http, "tx-once") == ["c", "a", "b"]
    headers = replay(http, "tx-once")[0]["properties"]["headers"]
    assert headers["x-producer-id"] == "p-once" and headers["x-producer-seq"] == 0


def test_parts_left_out_of_the_commit_are_discarded(http: httpx.Client) -> None:
    declare(http, "tx-attempts")
    failed_attempt = stage(http, "p-att", 5, "tx-attempts", ["x1", "x2"])
    retried = stage(http, "p-att", 5, "tx-attempts", ["x1", "x2"])
    commit(http, "p-att", 5, [retried])
    assert payloads(http, "tx-attempts") == ["x1", "x2"]
    view = ok(http.get(f"{BASE}/p-att"))
    assert view["last_committed_seq"] == 5 and view["open_batches"] == []
    answer = commit(http, "p-att", 6, [failed_attempt], status=409)
    assert answer["field"] == "parts" and failed_attempt in answer["reason"]


def test_abort_discards_and_a_stage_after_commit_is_refused(http: httpx.Client) -> None:
    declare(http, "tx-abort")
    part = stage(http, "p-ab", 1, "tx-abort", ["gone"])
    assert ok(http.post(f"{BASE}/p-ab/batches/1/abort"))["discarded_parts"] == 1
    commit(http, "p-ab", 1, [part], status=409)
    kept = stage(http, "p-ab", 1, "tx-abort", ["kept"])
    commit(http, "p-ab", 1, [kept])
    refused = ok(http.post(f"{BASE}/p-ab/batches/1/parts", json={"messages": [
        {"routing_key": "tx-abort", "payload": "late"}]}), 409)
    assert "already committed" in refused["reason"]
    assert "committed" in ok(http.post(f"{BASE}/p-ab/batches/1/abort"), 409)["reason"]
    behind = ok(http.post(f"{BASE}/p-ab/batches/0/commit", json={"parts": []}), 409)
    assert "behind" in behind["reason"]
    assert payloads(http, "tx-abort") == ["kept"]


def test_a_batch_routes_to_several_queues_through_an_exchange(http: httpx.Client) -> None:
    ok(http.put("/api/exchanges/%2F/tx-topic", json={"type": "topic"}), 201, 204)
    for queue, key in (("tx-eu", "orders.eu"), ("tx-all", "orders.#")):
        declare(http, queue)
        ok(http.post(f"/api/bindings/%2F/e/tx-topic/q/{queue}", json={"routing_key": key}), 201)
    messages = [{"routing_key": "orders.eu", "payload": "1"},
                {"routing_key": "orders.us", "payload": "2"},
                {"routing_key": "nowhere", "payload": "3"}]
    part = ok(http.post(f"{BASE}/p-topic/batches/0/parts",
                        json={"exchange": "tx-topic", "messages": messages}), 201)["part"]
    answer = commit(http, "p-topic", 0, [part])
    assert answer["messages"] == 3 and answer["unroutable"] == 1
    assert payloads(http, "tx-eu") == ["1"]
    assert payloads(http, "tx-all") == ["1", "2"]


@pytest.mark.parametrize(("path", "body", "status", "field"), [
    ("p-bad/batches/0/parts", {"messages": []}, 400, "messages"),
    ("p-bad/batches/0/parts", {"messages": [{"routing_key": 5}]}, 400, "messages.0.routing_key"),
    ("p-bad/batches/0/parts", {"messages": [{"payload": "%%", "payload_encoding": "base64"}]},
     400, "messages.0.payload"),
    ("p-bad/batches/-1/parts", {"messages": [{"payload": "x"}]}, 400, "path.seq"),
    ("p-bad/batches/0/parts", {"exchange": "no-such", "messages": [{"payload": "x"}]}, 404, None),
    ("p-bad/batches/0/commit", {"parts": "abc"}, 400, "parts"),
    ("p-bad/batches/0/commit", {"parts": ["unknown"]}, 409, "parts"),
])
def test_bad_requests_are_refused_with_the_field(http: httpx.Client, path: str,
                                                 body: dict[str, Any], status: int,
                                                 field: str | None) -> None:
    answer = ok(http.post(f"{BASE}/{path}", json=body), status)
    assert answer.get("field") == field, answer


def test_unknown_producer_is_404(http: httpx.Client) -> None:
    ok(http.get(f"{BASE}/never-seen"), 404)


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path / "data")
    try:
        yield process
    finally:
        process.stop()


def test_staged_parts_and_commits_survive_a_kill(own_broker: BrokerProcess) -> None:
    auth = ("guest", "guest")
    with httpx.Client(base_url=own_broker.url, auth=auth, timeout=10.0) as http:
        declare(http, "tx-kill")
        done = stage(http, "p-kill", 0, "tx-kill", ["committed"])
        commit(http, "p-kill", 0, [done])
        staged = stage(http, "p-kill", 1, "tx-kill", ["staged-1", "staged-2"])
        assert payloads(http, "tx-kill") == ["committed"]
    own_broker.process.send_signal(signal.SIGKILL)
    own_broker.process.wait(10)
    restarted = start_broker(own_broker.data_dir)
    try:
        with httpx.Client(base_url=restarted.url, auth=auth, timeout=10.0) as http:
            assert commit(http, "p-kill", 0, [done])["duplicate"] is True
            assert commit(http, "p-kill", 1, [staged])["messages"] == 2
            assert commit(http, "p-kill", 1, [staged])["duplicate"] is True
            assert payloads(http, "tx-kill") == ["committed", "staged-1", "staged-2"]
            assert ok(http.get(f"{BASE}/p-kill"))["open_batches"] == []
    finally:
        restarted.stop()


def test_the_python_client_stages_commits_and_aborts(broker: BrokerProcess) -> None:
    from api.client import Client

    with Client(f"http://guest:guest@127.0.0.1:{broker.http_port}") as client:
        client.declare_queue("tx-client")
        parts = client.stage_batch("p-client", 0, [f"m{i}" for i in range(25)],
                                   routing_key="tx-client", part_size=10)
        assert len(parts) == 3
        assert client.producer("p-client")["open_batches"][0]["messages"] == 25
        assert client.commit_batch("p-client", 0, parts)["messages"] == 25
        assert client.commit_batch("p-client", 0, parts)["duplicate"] is True
        client.stage_batch("p-client", 1, ["dropped"], routing_key="tx-client")
        assert client.abort_batch("p-client", 1)["discarded_parts"] == 1
        records = list(client.replay("tx-client", from_offset=0))
        assert [r.body for r in records] == [f"m{i}".encode() for i in range(25)]
