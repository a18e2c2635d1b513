"""`logbroker serve --workers 2` as real processes on 127.0.0.1 (issue 28).

Two "hosts" (two supervisors with `--host-id hA` / `hB` and their own ports):
a queue with two replicas has a copy on each; a kill -9 of the worker leading
it fails the queue over to the other copy, and the supervisor starts the
worker again. One host alone: SIGTERM stops every worker, and a restart brings
the queues back with their messages; a supervisor killed with SIGKILL takes
its workers with it. Each test is bounded (~30 s).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pika

from bench.free_ports import free_port_run
from tests.integration.conftest import free_port, wait_for

START_TIMEOUT_S = 40.0
FAILOVER_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
AUTH = ("guest", "guest")


@dataclass
class Host:
    """One `serve --workers 2` node: its supervisor process and its shared ports."""

    name: str
    host_id: str
    data_dir: Path
    amqp_port: int
    http_port: int
    cluster_port: int
    extra: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None

    def start(self, secret: Path) -> None:
        log = open(self.data_dir.parent / f"{self.name}.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "logbroker", "serve", "--workers", "2",
             "--node-name", self.name, "--host-id", self.host_id, "--host", "127.0.0.1",
             "--data-dir", str(self.data_dir), "--amqp-port", str(self.amqp_port),
             "--http-port", str(self.http_port), "--cluster-port", str(self.cluster_port),
             "--cluster-secret-file", str(secret), *self.extra],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()

    def stop(self) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        workers = self.workers()
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for pid in [self.process.pid, *workers.values()]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.process.wait(10)
            return None

    def workers(self) -> dict[str, int]:
        """The running workers' node names -> pids (children of the supervisor)."""
        assert self.process is not None
        found: dict[str, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) != self.process.pid:
                continue
            names = [argv[i + 1].decode() for i, word in enumerate(argv[:-1])
                     if word == b"--node-name"]
            if names:
                found[names[-1]] = int(entry)  # the last --node-name wins (the worker's)
        return found

    def get(self, path: str) -> Any:
        try:
            reply = httpx.get(f"http://127.0.0.1:{self.http_port}{path}", auth=AUTH,
                              timeout=3.0)
        except httpx.HTTPError:
            return None
        return reply.json() if reply.status_code == 200 else None

    def amqp(self) -> pika.BlockingConnection:
        return pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", self.amqp_port, blocked_connection_timeout=10, socket_timeout=10))


def make_host(base: Path, name: str, host_id: str, *extra: str) -> Host:
    return Host(name, host_id, base / name, free_port(), free_port(), free_port_run(2), extra)


def cluster_ready(hosts: list[Host], members: int) -> bool:
    for host in hosts:
        status = host.get("/api/cluster")
        if status is None or status["leader"] is None or len(status["nodes"]) != members:
            return False
        # Up, linked, and its host recorded (a joined worker's first heartbeat says it).
        if not all(n["status"] == "up" and n["connected"] and n["host_id"]
                   for n in status["nodes"]):
            return False
    return True


def secret_file(base: Path) -> Path:
    secret = base / "secret"
    secret.write_text("workers-test-secret\n")
    secret.chmod(0o600)
    return secret


@contextlib.contextmanager
def running(hosts: list[Host], secret: Path, members: int) -> Iterator[list[Host]]:
    try:
        for host in hosts:
            host.start(secret)
        wait_for(lambda: cluster_ready(hosts, members), f"{members} members up",
                 START_TIMEOUT_S)
        yield hosts
    finally:
        for host in hosts:
            host.stop()


def publish(host: Host, queue: str, count: int, arguments: dict[str, Any]) -> None:
    connection = host.amqp()
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        channel.queue_declare(queue, durable=True, arguments=arguments)
        copies = int(arguments.get("x-queue-replicas", 1))
        if copies > 1:
            # A new queue refuses publishes (nack) until its followers are in sync.
            wait_for(lambda: len((host.get(f"/api/queues/%2F/{queue}") or {})
                                 .get("in_sync") or ()) >= copies,
                     f"{queue}'s {copies} copies in sync", START_TIMEOUT_S)
        for index in range(count):
            channel.basic_publish("", queue, f"{queue}-{index}".encode(),
                                  pika.BasicProperties(delivery_mode=2))
    finally:
        connection.close()


def drain(host: Host, queue: str, limit: int) -> list[bytes]:
    """Every message of `queue`, acked, read through any worker of `host`."""
    connection = host.amqp()
    bodies: list[bytes] = []
    try:
        channel = connection.channel()
        deadline = time.monotonic() + 20
        while len(bodies) < limit and time.monotonic() < deadline:
            method, _, body = channel.basic_get(queue)
            if method is None:
                time.sleep(0.05)
                continue
            channel.basic_ack(method.delivery_tag)
            bodies.append(body)
    finally:
        connection.close()
    return bodies


def test_copies_on_both_hosts_and_a_killed_worker_fails_over_and_comes_back(
        tmp_path: Path) -> None:
    secret = secret_file(tmp_path)
    host_a = make_host(tmp_path, "a", "hA")
    host_b = make_host(tmp_path, "b", "hB", "--join", f"a@127.0.0.1:{host_a.cluster_port}")
    with running([host_a, host_b], secret, members=4):
        status = host_b.get("/api/cluster")
        assert {h["host_id"]: sorted(h["workers"]) for h in status["hosts"]} == {
            "hA": ["a", "a-w2"], "hB": ["b", "b-w2"]}
        host_of = {n["name"]: n["host_id"] for n in status["nodes"]}
        queues = [f"r{index}" for index in range(4)]
        for queue in queues:
            publish(host_a, queue, 20, {"x-queue-replicas": 2})
        views = {q: host_a.get(f"/api/queues/%2F/{q}") for q in queues}
        for queue, view in views.items():
            assert sorted(host_of[m] for m in view["members"]) == ["hA", "hB"], (queue, view)
        # kill -9 the worker leading r0: its copy on the other host takes over.
        victim = views["r0"]["leader"]
        owner = host_a if host_of[victim] == "hA" else host_b
        other = host_b if owner is host_a else host_a
        old_pid = owner.workers()[victim]
        os.kill(old_pid, signal.SIGKILL)

        def failed_over() -> bool:
            view = other.get("/api/queues/%2F/r0")
            return view is not None and view["leader"] not in (victim, None)
        wait_for(failed_over, "r0 to fail over to its other copy", FAILOVER_TIMEOUT_S)
        assert host_of[other.get("/api/queues/%2F/r0")["leader"]] != host_of[victim]

        def restarted() -> bool:
            pid = owner.workers().get(victim)
            return pid is not None and pid != old_pid
        wait_for(restarted, f"the supervisor to restart {victim}", FAILOVER_TIMEOUT_S)
        wait_for(lambda: cluster_ready([host_a, host_b], 4), "the worker back up",
                 START_TIMEOUT_S)
        assert sorted(drain(other, "r0", 20)) == sorted(f"r0-{i}".encode() for i in range(20))
        assert owner.process is not None and owner.process.poll() is None
    assert host_a.process is not None and host_a.process.returncode == 0


def test_sigterm_stops_every_worker_and_a_restart_keeps_the_queues(tmp_path: Path) -> None:
    secret = secret_file(tmp_path)
    host = make_host(tmp_path, "solo", "h1")
    queues = [f"q{index}" for index in range(6)]
    # Copies on both workers: the stop hands those led by solo-w2 to solo (stopped
    # after it), and none of their messages may be lost on the way.
    replicated = [f"rq{index}" for index in range(4)]
    with running([host], secret, members=2):
        for queue in queues:
            publish(host, queue, 10, {"x-queue-leader-locator": "balanced"})
        for queue in replicated:
            publish(host, queue, 10, {"x-queue-leader-locator": "balanced",
                                      "x-queue-replicas": 2})
        leaders = {host.get(f"/api/queues/%2F/{q}")["leader"] for q in queues}
        assert leaders == {"solo", "solo-w2"}  # spread over the workers
        led_by_w2 = [q for q in replicated
                     if host.get(f"/api/queues/%2F/{q}")["leader"] == "solo-w2"]
        assert led_by_w2  # balanced: some of them
        workers = host.workers()
        assert sorted(workers) == ["solo", "solo-w2"]
        assert host.stop() == 0
        assert not any(alive(pid) for pid in workers.values())
        # solo-w2 stopped while solo still ran, so it could hand its queues over.
        log = (tmp_path / "solo.log").read_text()
        for queue in led_by_w2:
            assert f"queue '{queue}' in vhost '/' handed over to solo " in log, queue
    with running([host], secret, members=2):
        for queue in queues + replicated:
            bodies = drain(host, queue, 10)
            assert sorted(bodies) == sorted(f"{queue}-{i}".encode() for i in range(10))
        # A supervisor killed outright takes its workers with it (no orphan holds the ports).
        workers = host.workers()
        assert host.process is not None
        host.process.kill()
        host.process.wait(10)
        wait_for(lambda: not any(alive(pid) for pid in workers.values()),
                 "the workers to stop with their supervisor", STOP_TIMEOUT_S)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
