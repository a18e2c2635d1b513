"""A real `logbroker serve` process on 127.0.0.1 for the HTTP, WebSocket and CLI tests.

One broker per test module (starting one costs about a second); tests keep
apart by using their own queue names. The fixture gives the ports and the
base URL and stops the process, bounded in time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

from bench import free_ports

START_TIMEOUT_S = 20.0
T = TypeVar("T")
STOP_TIMEOUT_S = 10.0


def free_port() -> int:
    """A port below the ephemeral range, where no outgoing connection can take it
    before the broker binds it (bench/free_ports.py)."""
    return free_ports.free_port()


@dataclass
class BrokerProcess:
    process: subprocess.Popen[bytes]
    data_dir: Path
    amqp_port: int
    http_port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.http_port}/ws"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)


def start_broker(data_dir: Path, *extra: str, amqp_port: int | None = None,
                 http_port: int | None = None) -> BrokerProcess:
    """`logbroker serve` on `data_dir`, on free ports unless told (a restart keeps them)."""
    amqp_port, http_port = amqp_port or free_port(), http_port or free_port()
    log_path = data_dir.parent / f"{data_dir.name}.log"
    log_file = open(log_path, "wb")  # noqa: SIM115 -- the child writes it until it stops
    process = subprocess.Popen(
        [sys.executable, "-m", "logbroker", "serve", "--workers", "1", "--data-dir", str(data_dir),
         "--host", "127.0.0.1", "--amqp-port", str(amqp_port), "--http-port", str(http_port),
         *extra],
        stdout=log_file, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    log_file.close()
    broker = BrokerProcess(process, data_dir, amqp_port, http_port, log_path)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the broker exited at start:\n{broker.log()}")
        try:
            if httpx.get(f"{broker.url}/api/overview", auth=("guest", "guest"),
                         timeout=1.0).status_code == 200:
                return broker
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    broker.stop()
    raise TimeoutError(f"the broker did not answer in time:\n{broker.log()}")


def wait_for(probe: Callable[[], T], what: str, timeout_s: float = 5.0) -> T:
    """Poll `probe` until it answers something truthy; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("broker") / "data")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def http(broker: BrokerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=broker.url, auth=("guest", "guest"), timeout=10.0) as client:
        yield client
