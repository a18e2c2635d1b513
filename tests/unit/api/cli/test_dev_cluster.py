"""`logbroker dev-cluster`: the plan, each node's command line, the secret, the start-up wait.

No process is started: the start-up wait runs against stand-ins.
"""

from __future__ import annotations

import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from api.cli import dev_cluster
from api.cli.dev_cluster import DevNode, plan, serve_command
from api.node import build_parser


def flags(command: list[str]) -> dict[str, str]:
    """`--flag value` pairs of a serve command line (after `-m logbroker serve`)."""
    assert command[1:4] == ["-m", "logbroker", "serve"]
    rest = command[4:]
    assert len(rest) % 2 == 0 and all(word.startswith("--") for word in rest[::2])
    return dict(zip(rest[::2], rest[1::2], strict=True))


def test_the_parser_defaults_and_limits() -> None:
    args = build_parser().parse_args(["dev-cluster"])
    assert args.handler is dev_cluster.dev_cluster
    assert (args.nodes, args.amqp_base, args.http_base, args.cluster_base) == (
        3, 5672, 15672, 25672)
    args = build_parser().parse_args(["dev-cluster", "--nodes", "9", "--base-dir", "/x",
                                      "--amqp-base", "6000"])
    assert (args.nodes, args.base_dir, args.amqp_base) == (9, "/x", 6000)
    for bad in (["--nodes", "0"], ["--nodes", "10"], ["--nodes", "three"],
                ["--http-base", "65530"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["dev-cluster", *bad])


def test_three_nodes_on_consecutive_ports(tmp_path: Path) -> None:
    nodes = plan(3, tmp_path, 5672, 15672, 25672)
    assert [(n.name, n.amqp_port, n.http_port, n.cluster_port) for n in nodes] == [
        ("n1", 5672, 15672, 25672), ("n2", 5673, 15673, 25673), ("n3", 5674, 15674, 25674)]
    assert [n.data_dir for n in nodes] == [tmp_path / "n1", tmp_path / "n2", tmp_path / "n3"]
    assert [n.log_path for n in nodes] == [tmp_path / "n1.log", tmp_path / "n2.log",
                                          tmp_path / "n3.log"]
    assert nodes[1].amqp_url == "amqp://guest:guest@127.0.0.1:5673/"
    assert nodes[1].http_url == "http://guest:guest@127.0.0.1:15673"
    with pytest.raises(ValueError):
        plan(10, tmp_path, 5672, 15672, 25672)


def test_each_node_gets_its_own_ports_and_every_peer(tmp_path: Path) -> None:
    nodes = plan(3, tmp_path, 6000, 16000, 26000)
    secret = tmp_path / "cluster-secret"
    commands = [serve_command(node, nodes, secret, python="py") for node in nodes]
    assert all(command[0] == "py" for command in commands)
    peers = "n1@127.0.0.1:26000,n2@127.0.0.1:26001,n3@127.0.0.1:26002"
    assert flags(commands[1]) == {
        "--workers": "1", "--node-name": "n2", "--host": "127.0.0.1", "--amqp-port": "6001",
        "--http-port": "16001", "--cluster-port": "26001",
        "--data-dir": str(tmp_path / "n2"), "--peers": peers,
        "--cluster-secret-file": str(secret)}
    assert {flags(c)["--peers"] for c in commands} == {peers}
    assert [flags(c)["--node-name"] for c in commands] == ["n1", "n2", "n3"]


def test_the_serve_command_line_is_one_the_serve_parser_reads(tmp_path: Path) -> None:
    nodes = plan(2, tmp_path, 5672, 15672, 25672)
    command = serve_command(nodes[0], nodes, tmp_path / "secret")
    args = build_parser().parse_args(command[3:])
    assert (args.command, args.node_name, args.host, args.amqp_port, args.http_port) == (
        "serve", "n1", "127.0.0.1", 5672, 15672)
    assert (args.cluster_port, args.peers, args.cluster_secret_file) == (
        25672, "n1@127.0.0.1:25672,n2@127.0.0.1:25673", str(tmp_path / "secret"))


def test_the_secret_is_private_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "base" / "cluster-secret"
    dev_cluster.ensure_secret(path)
    first = path.read_text()
    assert len(first.strip()) == 64
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    dev_cluster.ensure_secret(path)
    assert path.read_text() == first


class StandIn:
    """A process that is running (returncode None) or has exited."""

    def __init__(self, returncode: int | None = None) -> None:
        self.returncode = returncode
        self.pid = 4242

    def poll(self) -> int | None:
        return self.returncode


def processes(*codes: int | None) -> list[Any]:
    return [StandIn(code) for code in codes]


def test_the_wait_ends_once_every_node_answers(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dev_cluster, "POLL_INTERVAL_S", 0.001)
    nodes = plan(3, tmp_path, 5672, 15672, 25672)
    asked: list[str] = []

    def ready(node: DevNode) -> bool:
        asked.append(node.name)
        return len(asked) > 3  # nobody answers the first round
    assert dev_cluster.wait_until_ready(nodes, processes(None, None, None), threading.Event(),
                                        ready, timeout_s=5) is None
    assert asked == ["n1", "n2", "n3", "n1", "n2", "n3"]


def test_the_wait_reports_a_node_that_exits(tmp_path: Path) -> None:
    nodes = plan(2, tmp_path, 5672, 15672, 25672)
    nodes[1].log_path.write_text("address already in use\n")
    problem = dev_cluster.wait_until_ready(nodes, processes(None, 1), threading.Event(),
                                           lambda node: False, timeout_s=5)
    assert problem is not None
    assert "n2 exited with code 1" in problem and "address already in use" in problem


def test_the_wait_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dev_cluster, "POLL_INTERVAL_S", 0.001)
    nodes = plan(2, tmp_path, 5672, 15672, 25672)
    problem = dev_cluster.wait_until_ready(nodes, processes(None, None), threading.Event(),
                                           lambda node: node.name == "n1", timeout_s=0.05)
    assert problem is not None and "not answering" in problem and "n2" in problem
    assert "n1 (" not in problem


def test_ctrl_c_ends_the_wait(tmp_path: Path) -> None:
    stop = threading.Event()
    stop.set()
    nodes = plan(1, tmp_path, 5672, 15672, 25672)
    assert dev_cluster.wait_until_ready(nodes, processes(None), stop, lambda node: False,
                                        timeout_s=5) == "interrupted"


def test_the_banner_lists_every_node(tmp_path: Path) -> None:
    nodes = plan(2, tmp_path, 5672, 15672, 25672)
    lines = dev_cluster.banner(nodes, processes(None, None)).splitlines()
    assert lines[0].startswith("n1  amqp://guest:guest@127.0.0.1:5672/  "
                               "http://guest:guest@127.0.0.1:15672  (pid 4242")
    assert lines[2] == ("for the CLI: export LOGBROKER_URL=http://guest:guest@127.0.0.1:15672,"
                        "http://guest:guest@127.0.0.1:15673")
