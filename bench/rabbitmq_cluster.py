"""A private 3-node RabbitMQ cluster on 127.0.0.1 for `bench/replication_bench.py`.

Each node is started as `bench/amqp_bench.py` starts its single node
(`ensure_rabbitmq`, `_rabbitmq_env`, `_served`: own HOME, data and log dirs in
a temp dir, free AMQP and distribution ports, no plugins), with in addition:
one Erlang cookie written into every node's HOME, a private epmd on a free port
bound to 127.0.0.1 (`ERL_EPMD_PORT`, `ERL_EPMD_ADDRESS`), and Erlang
distribution bound to 127.0.0.1. Nodes 2 and 3 join node 1 with
`rabbitmqctl stop_app / reset / join_cluster / start_app`. On exit every node
is stopped (`rabbitmqctl stop`, then SIGTERM / SIGKILL of its process group)
and the private epmd is killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from bench.amqp_bench import (
    RABBITMQ_SERVER,
    RABBITMQCTL,
    BenchError,
    _rabbitmq_env,
    _served,
    ensure_rabbitmq,
)
from bench.cluster_processes import say
from bench.free_ports import free_port

CTL_TIMEOUT_S = 120.0
LOOPBACK_DIST = "-kernel inet_dist_use_interface {127,0,0,1}"


class RabbitNode:
    def __init__(self, index: int, cookie: str, epmd_port: int) -> None:
        self.name = f"bench{index}-{os.getpid()}@localhost"
        self.port = free_port()
        self.cookie, self.epmd_port = cookie, epmd_port
        self.env: dict[str, str] = {}

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/"

    def command(self, workdir: str) -> tuple[list[str], dict[str, str]]:
        cookie = Path(workdir, ".erlang.cookie")
        cookie.write_text(self.cookie)
        cookie.chmod(0o400)
        self.env = _rabbitmq_env(workdir, self.port, self.name) | {
            "ERL_EPMD_PORT": str(self.epmd_port), "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": LOOPBACK_DIST,
            "RABBITMQ_CTL_ERL_ARGS": LOOPBACK_DIST}
        return [RABBITMQ_SERVER], self.env

    def ctl(self, *arguments: str) -> str:
        """`rabbitmqctl -n NODE ARGS...` with this node's cookie and epmd; its stdout."""
        try:
            done = subprocess.run([RABBITMQCTL, "-n", self.name, *arguments], env=self.env,
                                  capture_output=True, text=True, timeout=CTL_TIMEOUT_S,
                                  check=False)
        except subprocess.TimeoutExpired as error:
            raise BenchError(f"rabbitmqctl {' '.join(arguments)} on {self.name}: "
                             f"no answer in {CTL_TIMEOUT_S:g} s") from error
        if done.returncode != 0:
            raise BenchError(f"rabbitmqctl {' '.join(arguments)} on {self.name} failed "
                             f"({done.returncode}): {done.stdout[-1500:]}{done.stderr[-1500:]}")
        return done.stdout


def _kill_epmd(port: int) -> None:
    epmd = shutil.which("epmd") or "epmd"
    env = dict(os.environ, ERL_EPMD_PORT=str(port))
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run([epmd, "-port", str(port), "-kill"], env=env, capture_output=True,
                       timeout=30, check=False)


def _running_nodes(node: RabbitNode) -> list[str]:
    status = json.loads(node.ctl("cluster_status", "--formatter", "json"))
    return sorted(status.get("running_nodes", []))


@contextlib.contextmanager
def rabbitmq_cluster(size: int = 3) -> Iterator[list[RabbitNode]]:
    """`size` RabbitMQ nodes joined into one cluster; yields them, the first one first."""
    ensure_rabbitmq()
    cookie, epmd_port = secrets.token_hex(20).upper(), free_port()
    nodes = [RabbitNode(index, cookie, epmd_port) for index in range(1, size + 1)]
    with contextlib.ExitStack() as stack:
        stack.callback(_kill_epmd, epmd_port)  # runs last, after every node stopped
        for node in nodes:
            stack.enter_context(_served(f"rabbitmq-{node.name.split('@')[0]}", node.port,
                                        node.command, [RABBITMQCTL, "-n", node.name, "stop"]))
            if node is not nodes[0]:
                say(f"rabbitmq: {node.name} joins {nodes[0].name}")
                node.ctl("stop_app")
                node.ctl("reset")
                node.ctl("join_cluster", nodes[0].name)
                node.ctl("start_app")
                node.ctl("await_startup")
        expected = sorted(node.name for node in nodes)
        running = _running_nodes(nodes[0])
        if running != expected:
            raise BenchError(f"RabbitMQ cluster has {running}, expected {expected}")
        say(f"rabbitmq: cluster of {size} running: {', '.join(running)}")
        yield nodes


def quorum_leader(node: RabbitNode, queue: str, members: int = 3) -> str:
    """The node name of `queue`'s leader, as `rabbitmqctl list_queues` reports it."""
    rows = json.loads(node.ctl("list_queues", "name", "type", "leader", "members",
                               "--formatter", "json"))
    for row in rows:
        if row.get("name") == queue:
            if row.get("type") != "quorum" or len(row.get("members", [])) != members:
                raise BenchError(f"{queue} is not a quorum queue with {members} members: {row}")
            return str(row["leader"])
    raise BenchError(f"{queue} not listed by {node.name}: {rows}")
