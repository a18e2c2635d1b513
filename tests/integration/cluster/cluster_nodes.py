"""Real `logbroker serve` nodes on 127.0.0.1 for the cluster tests: start, kill, stop, ask."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pika

from bench import free_ports
from tests.integration.cluster.tcp_proxy import TcpProxy
from tests.integration.conftest import free_port, wait_for

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 6.0  # SIGTERM to SIGKILL in the proxied cluster's stops
NAMES = ("n1", "n2", "n3")


@dataclass
class Node:
    name: str
    data_dir: Path
    amqp_port: int
    http_port: int
    cluster_port: int
    args: list[str]
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / f"{self.name}.log"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def start(self) -> None:
        with open(self.log_path, "ab") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "logbroker", "serve", "--workers", "1",
                 *self.args], stdout=log_file,
                stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def pause(self) -> None:
        """SIGSTOP: the process stays, silent, until `resume()`."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, and SIGKILL if the node has not exited after `timeout_s`."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()

    def status(self) -> dict[str, Any] | None:
        try:
            reply = httpx.get(f"{self.url}/api/cluster", auth=("guest", "guest"), timeout=2.0)
        except httpx.HTTPError:
            return None
        return reply.json() if reply.status_code == 200 else None

    def amqp(self) -> pika.BlockingConnection:
        return pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", self.amqp_port, blocked_connection_timeout=10, socket_timeout=10))


def make_node(base: Path, name: str, peers: str, secret_file: Path, ports: dict[str, int],
              *extra: str) -> Node:
    data_dir = base / name
    args = ["--node-name", name, "--data-dir", str(data_dir), "--host", "127.0.0.1",
            "--amqp-port", str(ports["amqp"]), "--http-port", str(ports["http"]),
            "--cluster-port", str(ports["cluster"]), "--cluster-secret-file", str(secret_file),
            *(["--peers", peers] if peers else []), *extra]
    return Node(name, data_dir, ports["amqp"], ports["http"], ports["cluster"], args)


def ready(nodes: list[Node]) -> bool:
    """Every node answers, knows a leader, and sees every node up and connected."""
    for node in nodes:
        status = node.status()
        if status is None or status["leader"] is None or len(status["nodes"]) != len(nodes):
            return False
        if not all(n["status"] == "up" and n["connected"] for n in status["nodes"]):
            return False
    return True


@contextlib.contextmanager
def running_cluster(base: Path, names: tuple[str, ...] = NAMES,
                    extra: Callable[[str], tuple[str, ...]] = lambda _name: ()
                    ) -> Iterator[list[Node]]:
    """Start one `logbroker serve` per name on free 127.0.0.1 ports (with `extra(name)`'s
    flags); stop them after."""
    secret_file = base / "secret"
    secret_file.write_text("integration-test-secret\n")
    secret_file.chmod(0o600)
    ports = [{"amqp": free_port(), "http": free_port(), "cluster": free_port()} for _ in names]
    peers = ",".join(f"{name}@127.0.0.1:{p['cluster']}" for name, p in zip(names, ports,
                                                                            strict=True))
    nodes = [make_node(base, name, peers, secret_file, p, *extra(name))
             for name, p in zip(names, ports, strict=True)]
    try:
        for node in nodes:
            node.start()
        wait_for(lambda: ready(nodes), "the cluster to form", START_TIMEOUT_S)
        yield nodes
    finally:
        for node in nodes:
            node.stop()


@contextlib.contextmanager
def running_proxied_cluster(base: Path, names: tuple[str, ...] = NAMES
                            ) -> Iterator[tuple[list[Node], dict[tuple[str, str], TcpProxy]]]:
    """Like `running_cluster`, but every ordered pair of nodes talks through its own proxy.

    Node A's `--peers` lists itself at its real cluster port and every other node B at
    the port of proxy (A, B), which forwards to B's cluster port; `--peers` addresses win
    over the advertised ones, so cutting both proxies of a pair cuts the pair. Yields the
    nodes and the proxies by (from, to).
    """
    secret_file = base / "secret"
    secret_file.write_text("integration-test-secret\n")
    secret_file.chmod(0o600)
    # Below the ephemeral range: a restarted node's port can otherwise be taken meanwhile
    # as an outgoing connection's source port (a proxy dialing the down node can even
    # connect to itself on it).
    ports = {name: {"amqp": free_ports.free_port(), "http": free_ports.free_port(),
                    "cluster": free_ports.free_port()}
             for name in names}
    proxies: dict[tuple[str, str], TcpProxy] = {}
    nodes: list[Node] = []
    try:
        for source in names:
            for target in names:
                if source != target:
                    proxies[source, target] = TcpProxy(ports[target]["cluster"],
                                                       f"{source}->{target}")
        for name in names:
            peers = ",".join(
                f"{other}@127.0.0.1:"
                f"{ports[other]['cluster'] if other == name else proxies[name, other].port}"
                for other in names)
            nodes.append(make_node(base, name, peers, secret_file, ports[name]))
        for node in nodes:
            node.start()
        wait_for(lambda: ready(nodes), "the proxied cluster to form", START_TIMEOUT_S)
        yield nodes, proxies
    finally:
        for node in nodes:
            node.resume()  # a SIGSTOPped node cannot take its SIGTERM
            node.stop(STOP_TIMEOUT_S)
        for proxy in proxies.values():
            proxy.close()


def leader_of(nodes: list[Node]) -> Node:
    names = {node.name for node in nodes}

    def agreed() -> str | None:
        leaders = {status["leader"] for node in nodes if (status := node.status())}
        return leaders.pop() if len(leaders) == 1 and leaders <= names else None
    name = wait_for(agreed, "one agreed Raft leader", 10.0)
    return next(node for node in nodes if node.name == name)


def queue_leader(node: Node, queue: str) -> str:
    view = httpx.get(f"{node.url}/api/queues/%2F/{queue}", auth=("guest", "guest"),
                     timeout=5.0).json()
    assert view["node"] == view["leader"]
    return str(view["leader"])
