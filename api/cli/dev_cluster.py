"""`logbroker dev-cluster --nodes 3`: a local cluster on 127.0.0.1, for trying it on one machine.

The flags and the usage text are `api.cli.dev_cluster_arguments`' (the parser
imports only those); this module runs the nodes.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

from api.cli.dev_cluster_arguments import MAX_NODES
from api.client import Client

HOST = "127.0.0.1"
SECRET_FILE = "cluster-secret"
START_TIMEOUT_S = 30.0
POLL_INTERVAL_S = 0.25
STOP_TIMEOUT_S = 10.0
LOG_TAIL_BYTES = 2000
DEFAULT_USER, DEFAULT_PASSWORD = "guest", "guest"


@dataclass(frozen=True)
class DevNode:
    name: str
    amqp_port: int
    http_port: int
    cluster_port: int
    data_dir: Path
    log_path: Path

    @property
    def peer(self) -> str:
        return f"{self.name}@{HOST}:{self.cluster_port}"

    @property
    def amqp_url(self) -> str:
        return f"amqp://{DEFAULT_USER}:{DEFAULT_PASSWORD}@{HOST}:{self.amqp_port}/"

    @property
    def http_url(self) -> str:
        return f"http://{DEFAULT_USER}:{DEFAULT_PASSWORD}@{HOST}:{self.http_port}"


def plan(count: int, base_dir: Path, amqp_base: int, http_base: int, cluster_base: int
         ) -> list[DevNode]:
    """The nodes n1..nN: their ports, data dirs and logs."""
    if not 1 <= count <= MAX_NODES:
        raise ValueError(f"--nodes must be between 1 and {MAX_NODES}")
    return [DevNode(f"n{i}", amqp_base + i - 1, http_base + i - 1, cluster_base + i - 1,
                    base_dir / f"n{i}", base_dir / f"n{i}.log")
            for i in range(1, count + 1)]


def serve_command(node: DevNode, nodes: Sequence[DevNode], secret_file: Path,
                  python: str = sys.executable) -> list[str]:
    """The command line that starts `node` as a member of the cluster `nodes`."""
    return [python, "-m", "logbroker", "serve", "--workers", "1",
            "--node-name", node.name,
            "--host", HOST,
            "--amqp-port", str(node.amqp_port),
            "--http-port", str(node.http_port),
            "--cluster-port", str(node.cluster_port),
            "--data-dir", str(node.data_dir),
            "--peers", ",".join(n.peer for n in nodes),
            "--cluster-secret-file", str(secret_file)]


def ensure_secret(path: Path) -> None:
    """The shared cluster secret: created once (random, mode 0600), then reused."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(descriptor, "w") as secret:
        secret.write(secrets.token_hex(32) + "\n")


def log_tail(path: Path) -> str:
    try:
        with path.open("rb") as log:
            log.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
            return log.read().decode("utf-8", "replace")
    except OSError:
        return ""


class Stopper:
    """Ctrl-C and SIGTERM set an event instead of interrupting (restored by `restore`)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._handle)

    def _handle(self, _signum: int, _frame: FrameType | None) -> None:
        self.event.set()

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()


def start_node(node: DevNode, command: list[str]) -> subprocess.Popen[bytes]:
    node.data_dir.mkdir(parents=True, exist_ok=True)
    with node.log_path.open("wb") as log:
        # Its own session: Ctrl-C reaches dev-cluster only, which stops the nodes in order.
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})


def answers(node: DevNode) -> bool:
    try:
        response = httpx.get(f"http://{HOST}:{node.http_port}/api/cluster",
                             auth=(DEFAULT_USER, DEFAULT_PASSWORD), timeout=1.0)
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def wait_until_ready(nodes: Sequence[DevNode], processes: Sequence[subprocess.Popen[bytes]],
                     stop: threading.Event, ready: Callable[[DevNode], bool] = answers,
                     timeout_s: float = START_TIMEOUT_S) -> str | None:
    """None once every node answers; else why not (a node exited, time ran out, Ctrl-C)."""
    waiting = list(range(len(nodes)))
    deadline = time.monotonic() + timeout_s
    while waiting:
        for index in list(waiting):
            code = processes[index].poll()
            if code is not None:
                node = nodes[index]
                return (f"{node.name} exited with code {code} at start; the end of "
                        f"{node.log_path}:\n{log_tail(node.log_path)}")
            if ready(nodes[index]):
                waiting.remove(index)
        if not waiting:
            return None
        if time.monotonic() >= deadline:
            names = ", ".join(f"{nodes[i].name} (log {nodes[i].log_path})" for i in waiting)
            return f"not answering GET /api/cluster after {timeout_s:.0f} s: {names}"
        if stop.wait(POLL_INTERVAL_S):
            return "interrupted"
    return None


def stop_all(processes: Sequence[subprocess.Popen[bytes]],
             timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM to every node still running; SIGKILL to those not gone after `timeout_s`."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + timeout_s
    for process in processes:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def banner(nodes: Sequence[DevNode], processes: Sequence[subprocess.Popen[bytes]]) -> str:
    lines = [f"{node.name}  {node.amqp_url}  {node.http_url}  (pid {process.pid}, "
             f"log {node.log_path})" for node, process in zip(nodes, processes, strict=True)]
    urls = ",".join(node.http_url for node in nodes)
    lines.append(f"for the CLI: export LOGBROKER_URL={urls}")
    lines.append("Ctrl-C stops the cluster.")
    return "\n".join(lines)


def watch(nodes: Sequence[DevNode], processes: Sequence[subprocess.Popen[bytes]],
          stop: threading.Event) -> None:
    """Until Ctrl-C / SIGTERM: report a node that exits (the others keep running)."""
    reported: set[int] = set()
    while not stop.wait(1.0):
        for index, process in enumerate(processes):
            code = process.poll()
            if code is not None and index not in reported:
                reported.add(index)
                print(f"{nodes[index].name} exited with code {code} "
                      f"(log {nodes[index].log_path})", file=sys.stderr, flush=True)


def run(nodes: Sequence[DevNode], secret_file: Path) -> int:
    ensure_secret(secret_file)
    stopper = Stopper()
    stopper.install()
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for node in nodes:
            processes.append(start_node(node, serve_command(node, nodes, secret_file)))
        problem = wait_until_ready(nodes, processes, stopper.event)
        if problem is not None:
            print(f"logbroker: dev-cluster: {problem}", file=sys.stderr)
            return 130 if problem == "interrupted" else 1
        print(banner(nodes, processes), flush=True)
        watch(nodes, processes, stopper.event)
        print("stopping the cluster", file=sys.stderr, flush=True)
        return 0
    finally:
        stop_all(processes)
        stopper.restore()


def dev_cluster(_client: Client, args: argparse.Namespace) -> int:
    """The `dev-cluster` handler (the client the CLI builds is not used)."""
    base_dir = Path(args.base_dir).resolve()
    nodes = plan(args.nodes, base_dir, args.amqp_base, args.http_base, args.cluster_base)
    return run(nodes, base_dir / SECRET_FILE)
