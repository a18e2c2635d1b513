"""Shared by the Spark tests: declaring and filling queues over HTTP, collecting a
streaming query's micro-batches."""

from __future__ import annotations

import threading
import time
from typing import Any
from urllib.parse import quote

import httpx


def declare(http: httpx.Client, queue: str, arguments: dict[str, Any] | None = None) -> None:
    http.put(f"/api/queues/%2F/{quote(queue, safe='')}",
             json={"durable": True, "arguments": arguments or {}}).raise_for_status()


def publish(http: httpx.Client, queue: str, bodies: list[str],
            properties: dict[str, Any] | None = None) -> None:
    for start in range(0, len(bodies), 1000):
        messages = [{"routing_key": queue, "payload": body, "payload_encoding": "string",
                     "properties": properties or {}} for body in bodies[start:start + 1000]]
        answer = http.post("/api/exchanges/%2F/amq.default/publish-batch",
                           json={"messages": messages})
        answer.raise_for_status()
        assert all(r["confirmed"] and r["routed"] for r in answer.json()["results"])


def queue_view(http: httpx.Client, queue: str) -> dict[str, Any]:
    answer = http.get(f"/api/queues/%2F/{quote(queue, safe='')}")
    answer.raise_for_status()
    view: dict[str, Any] = answer.json()
    return view


class BatchCollector:
    """A foreachBatch function keeping each micro-batch's rows by batch id: a batch Spark
    runs again after a restart must hold the same rows (checked), so the result is
    exactly once, as an idempotent sink's would be."""

    def __init__(self, columns: tuple[str, ...] = ("queue", "offset", "body")) -> None:
        self.columns = columns
        self.batches: dict[int, list[tuple[Any, ...]]] = {}
        self.rerun_mismatches: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, frame: Any, batch_id: int) -> None:
        rows = [tuple(row[c] for c in self.columns) for row in frame.collect()]
        with self.lock:
            if batch_id in self.batches and self.batches[batch_id] != rows:
                self.rerun_mismatches.append(batch_id)
            self.batches[batch_id] = rows

    def rows(self) -> list[tuple[Any, ...]]:
        with self.lock:
            return [row for batch_id in sorted(self.batches) for row in self.batches[batch_id]]

    def count(self) -> int:
        return len(self.rows())


def wait_until(probe: Any, what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.1)
