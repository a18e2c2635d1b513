"""The connector's one door to the broker: its public HTTP API, with failover.

Every call goes to the current node and moves on to the next one on a
connection error or a 503, and to a queue's leader when a node answers 421
with `X-Queue-Leader-Url` (a replicated queue's log is read on its leader),
until `retry_ms` has passed. Each retry is safe: reads are reads; a staged part
that arrives twice is just an unlisted part, discarded at commit; a commit is
idempotent per (producer, seq). Node addresses and errors are api.client's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from api.client.client_tls import client_tls_context
from api.client.errors import ConnectionFailed, InvalidUrl, LogbrokerError, error_from_response
from api.client.urls import Node, parse_url, parse_urls
from connectors.spark.option_errors import OptionError
from connectors.spark.source_options import Connection

LEADER_HEADER = "X-Queue-Leader-Url"
RETRY_STATUSES = (502, 503, 504)
TIMEOUT = httpx.Timeout(60.0, connect=5.0)


def segment(name: str) -> str:
    return quote(name, safe="")


class BrokerHttp:
    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.nodes: list[Node] = parse_urls(connection.brokers)
        self._current = 0
        self._leaders: dict[str, Node] = {}  # queue -> the node that leads it, once told
        try:  # a wrong path fails here, on the driver, before any task runs
            tls = client_tls_context(connection.ca_file, connection.cert_file,
                                     connection.key_file)
        except InvalidUrl as error:
            raise OptionError("caFile/certFile/keyFile", str(error)) from None
        self._http = httpx.Client(timeout=TIMEOUT, verify=tls if tls is not None else True)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> BrokerHttp:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def vhost(self) -> str:
        return segment(self.connection.vhost)

    def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                body: Any = None, queue: str | None = None,
                ok: tuple[int, ...] = (200, 201, 204)) -> httpx.Response:
        """The answer with a status in `ok`; LogbrokerError for a refusal; ConnectionFailed
        when no node could answer within the retry time."""
        deadline = time.monotonic() + self.connection.retry_ms / 1000
        problems: list[str] = []
        pause = 0.05
        while True:
            node = self._leaders.get(queue or "") or self.nodes[self._current]
            try:
                response = self._http.request(method, node.base_url + path, params=params,
                                              json=body, auth=node.auth)
            except httpx.TransportError as error:
                problems.append(f"{node}: {type(error).__name__}: {error}")
                self._failed(node, queue)
            else:
                if response.status_code in ok:
                    return response
                if response.status_code == 421 and response.headers.get(LEADER_HEADER):
                    leader = parse_url(response.headers[LEADER_HEADER])
                    # The leader's URL carries no credentials: use the ones that worked here.
                    self._leaders[queue or ""] = Node(leader.base_url, node.user, node.password)
                    problems.append(f"{node}: 421, queue led by {leader}")
                    continue
                if response.status_code not in RETRY_STATUSES:
                    raise error_from_response(response.status_code, response.content)
                problems.append(f"{node}: HTTP {response.status_code}")
                self._failed(node, queue)
            if time.monotonic() >= deadline:
                raise ConnectionFailed(
                    f"{method} {path}: no broker node answered within brokerRetryMs="
                    f"{self.connection.retry_ms} ({'; '.join(problems[-len(self.nodes) - 2:])})")
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _failed(self, node: Node, queue: str | None) -> None:
        if queue is not None and self._leaders.get(queue) == node:
            del self._leaders[queue]  # the leader moved or died: ask the nodes again
        elif self.nodes[self._current] == node:
            self._current = (self._current + 1) % len(self.nodes)

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        return orjson.loads(self.request(method, path, **kwargs).content)

    # ------------------------------------------------------------------ queues, replay

    def queue_view(self, queue: str) -> dict[str, Any]:
        view: dict[str, Any] = self.json("GET", f"/api/queues/{self.vhost}/{segment(queue)}")
        return view

    def replay(self, queue: str, from_offset: int | None, to_offset: int | None = None, *,
               from_timestamp: int | None = None, max_messages: int = 100_000,
               max_bytes: int = 8 << 20) -> dict[str, Any]:
        params: dict[str, Any] = {"max_messages": max_messages, "max_bytes": max_bytes,
                                  "encoding": "base64"}
        if from_timestamp is not None:
            params["from_timestamp"] = from_timestamp
        else:
            params["from_offset"] = from_offset
        if to_offset is not None:
            params["to_offset"] = to_offset
        page: dict[str, Any] = self.json(
            "GET", f"/api/queues/{self.vhost}/{segment(queue)}/messages", params=params,
            queue=queue)
        return page

    # ------------------------------------------------------------------ consumer groups

    def group(self, name: str) -> dict[str, Any] | None:
        """The group's view, or None for a group the broker does not know (404)."""
        try:
            view: dict[str, Any] = self.json(
                "GET", f"/api/consumer-groups/{self.vhost}/{segment(name)}")
        except LogbrokerError as error:
            if error.status == 404:
                return None
            raise
        return view

    def commit_group(self, name: str, offsets: Mapping[str, int]) -> None:
        self.request("PUT", f"/api/consumer-groups/{self.vhost}/{segment(name)}",
                     body={"offsets": dict(offsets)})

    # ------------------------------------------------------------------ producer batches

    def _batch_path(self, producer: str, seq: int) -> str:
        return f"/api/producers/{self.vhost}/{segment(producer)}/batches/{seq}"

    def stage_part(self, producer: str, seq: int, exchange: str,
                   messages: list[dict[str, Any]]) -> str:
        answer = self.json("POST", f"{self._batch_path(producer, seq)}/parts",
                           body={"exchange": exchange, "messages": messages})
        return str(answer["part"])

    def commit_batch(self, producer: str, seq: int, parts: list[str]) -> dict[str, Any]:
        answer: dict[str, Any] = self.json(
            "POST", f"{self._batch_path(producer, seq)}/commit", body={"parts": parts})
        return answer

    def abort_batch(self, producer: str, seq: int) -> None:
        self.request("POST", f"{self._batch_path(producer, seq)}/abort")

    def producer(self, producer: str) -> dict[str, Any] | None:
        try:
            view: dict[str, Any] = self.json(
                "GET", f"/api/producers/{self.vhost}/{segment(producer)}")
        except LogbrokerError as error:
            if error.status == 404:
                return None
            raise
        return view
