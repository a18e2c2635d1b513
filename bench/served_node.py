"""One `logbroker serve` process (one worker) on free 127.0.0.1 ports for a bench: started,
waited for until its HTTP API answers, stopped with SIGTERM and its data dir removed."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.amqp_bench import BenchError
from bench.free_ports import free_port

GUEST = ("guest", "guest")


@dataclass
class ServedNode:
    amqp_port: int
    http_port: int
    pid: int = 0

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.http_port}/ws"

    @property
    def amqp_url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/"


@contextlib.contextmanager
def served_node(prefix: str, *extra: str, start_timeout_s: float = 60.0
                ) -> Iterator[ServedNode]:
    """A node started with `extra` arguments; BenchError with its log's tail when it
    exits or does not answer within `start_timeout_s`."""
    workdir = tempfile.mkdtemp(prefix=f"{prefix}-")
    node = ServedNode(free_port(), free_port())
    log_path = os.path.join(workdir, "console.log")
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "logbroker", "serve", "--workers", "1", "--data-dir",
             os.path.join(workdir, "data"), "--host", "127.0.0.1",
             "--amqp-port", str(node.amqp_port), "--http-port", str(node.http_port), *extra],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    node.pid = process.pid
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise BenchError(f"logbroker ({prefix}) did not start: "
                                   f"{Path(log_path).read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{node.http_url}/api/overview", auth=GUEST).status_code == 200:
                    break
            time.sleep(0.1)
        yield node
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(workdir, ignore_errors=True)
