"""The three `logbroker serve` processes of `bench/cluster_bench.py`: start, kill -9,
stop, and wait until the cluster is whole again.

Nodes are described and started with the same command line as
`logbroker dev-cluster` (`api/cli/dev_cluster.py`), on free ports.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from api.cli.dev_cluster import SECRET_FILE, DevNode, ensure_secret, log_tail, serve_command
from bench.amqp_bench import BenchError
from bench.free_ports import free_port

Result = dict[str, Any]
ROOT = str(Path(__file__).resolve().parents[1])
HOST = "127.0.0.1"
AUTH = ("guest", "guest")
NODE_COUNT = 3
POLL_S = 0.1
STOP_TIMEOUT_S = 10.0
PROBLEM_MARKERS = (" ERROR ", " CRITICAL ", "Traceback (most recent call last)")


def say(message: str) -> None:
    print(f"[cluster-bench] {message}", file=sys.stderr, flush=True)



@dataclass
class Node:
    """A node as `logbroker dev-cluster` describes it (`spec`), and its process."""

    spec: DevNode
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def amqp_port(self) -> int:
        return self.spec.amqp_port

    @property
    def http_port(self) -> int:
        return self.spec.http_port

    @property
    def log_path(self) -> Path:
        return self.spec.log_path

    @property
    def amqp_url(self) -> str:
        return self.spec.amqp_url

    @property
    def http_url(self) -> str:
        return f"http://{HOST}:{self.http_port}"  # credentials go as `auth`

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


def get_json(node: Node, path: str, timeout_s: float) -> Result | None:
    """`GET path` on the node's HTTP API; None if it does not answer 200."""
    try:
        response = httpx.get(f"{node.http_url}{path}", auth=AUTH, timeout=timeout_s)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    document: Result = response.json()
    return document


@dataclass
class Cluster:
    workdir: Path
    nodes: list[Node] = field(default_factory=list)
    secret_file: Path = field(init=False)
    problems: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.secret_file = self.workdir / SECRET_FILE
        ensure_secret(self.secret_file)
        self.nodes = [Node(DevNode(f"n{i}", free_port(), free_port(), free_port(),
                                   self.workdir / f"n{i}", self.workdir / f"n{i}.log"))
                      for i in range(1, NODE_COUNT + 1)]
        self._env = {key: value for key, value in os.environ.items()
                     if not key.startswith("LOGBROKER_")}  # only the flags below count
        self._env["PYTHONUNBUFFERED"] = "1"

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise BenchError(f"no node {name!r} in this cluster")

    def command(self, node: Node) -> list[str]:
        return serve_command(node.spec, [n.spec for n in self.nodes], self.secret_file)

    def start(self, node: Node) -> None:
        node.spec.data_dir.mkdir(parents=True, exist_ok=True)
        node.starts += 1
        with node.log_path.open("ab") as log:
            log.write(f"--- cluster-bench: start {node.starts} of {node.name} at "
                      f"{time.strftime('%H:%M:%S')} ---\n".encode())
            log.flush()
            node.process = subprocess.Popen(
                self.command(node), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, env=self._env, cwd=ROOT)

    def kill9(self, node: Node) -> None:
        if node.process is not None and node.process.poll() is None:
            node.process.send_signal(signal.SIGKILL)

    def reap(self, node: Node) -> None:
        if node.process is not None:
            node.process.wait(timeout=STOP_TIMEOUT_S)

    def stop_all(self) -> None:
        """SIGTERM to every node, SIGKILL to its process group after STOP_TIMEOUT_S."""
        for node in self.nodes:
            if node.running and node.process is not None:
                node.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for node in self.nodes:
            process = node.process
            if process is None:
                continue
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                say(f"{node.name} (pid {process.pid}) ignored SIGTERM; killing it")
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)  # its own session (process group)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=STOP_TIMEOUT_S)

    def status(self, node: Node) -> Result | None:
        return get_json(node, "/api/cluster", 2.0)

    def _healthy_leader(self) -> str | None:
        """The leader all nodes agree on, if each sees every node up and connected."""
        leaders = set()
        for node in self.nodes:
            if not node.running:
                return None
            document = self.status(node)
            if document is None or document.get("leader") is None:
                return None
            members = document.get("nodes", [])
            if len(members) != len(self.nodes) or not all(
                    m.get("status") == "up" and m.get("connected") for m in members):
                return None
            leaders.add(document["leader"])
        return leaders.pop() if len(leaders) == 1 else None

    def wait_stable(self, timeout_s: float) -> str:
        """Wait until the cluster is whole and agrees on a leader; return its name."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node.process is not None and node.process.poll() is not None:
                    raise BenchError(f"{node.name} exited with code {node.process.poll()}:"
                                     f"\n{log_tail(node.log_path)}")
            leader = self._healthy_leader()
            if leader is not None:
                return leader
            time.sleep(POLL_S)
        views = {node.name: self.status(node) for node in self.nodes}
        raise BenchError(f"cluster not whole with one leader after {timeout_s:g} s: "
                         f"{json.dumps(views)[:3000]}")

    def log_problems(self) -> dict[str, list[str]]:
        """Per node, the log lines that report an error or a traceback."""
        problems: dict[str, list[str]] = {}
        for node in self.nodes:
            with contextlib.suppress(OSError):
                lines = node.log_path.read_text(errors="replace").splitlines()
                found = [line for line in lines if any(m in line for m in PROBLEM_MARKERS)]
                if found:
                    problems[node.name] = found
        return problems
