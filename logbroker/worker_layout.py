"""Who the workers of `logbroker serve --workers N` are: names, data dirs, ports, peers (pure).

A node with N workers is N cluster members on one host. Worker 1 is the node
as it was before workers: the node's own name, its data dir and its cluster
port (so a data dir written by a single process keeps its identity and its
queues). Worker K > 1 is `NAME-wK`, with its data in `DATA_DIR/workers/wK`
and the cluster port `BASE + K - 1`. Worker 1 founds the cluster with the
node's `--peers` (alone when there are none) or joins through `--join`;
every other worker joins through worker 1 and the node's peers and seeds,
and is reached at the host's address (the node's own entry in `--peers`, or
where worker 1 is reached).
A restart of the whole node gives every worker the same identity again, and
a worker that already is a member does not join twice (its Raft log says so).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from logbroker.cluster.cluster_settings import DEFAULT_CLUSTER_PORT, parse_peers

WORKERS_DIRECTORY = "workers"


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    index: int  # 1..N
    node_name: str
    data_dir: str
    cluster_port: int
    peers: str  # `--peers`: worker 1's founding members; a joining worker's own address
    join: str  # `--join` seeds

    def flags(self) -> list[str]:
        """The flags that make `logbroker serve` this worker (after the node's own: the
        last of a repeated flag wins)."""
        return ["--workers", "1", "--reuse-port", "true", "--node-name", self.node_name,
                "--data-dir", self.data_dir, "--cluster-port", str(self.cluster_port),
                "--peers", self.peers, "--join", self.join]


def worker_name(node_name: str, index: int) -> str:
    return node_name if index == 1 else f"{node_name}-w{index}"


def worker_specs(*, workers: int, node_name: str, data_dir: str, cluster_port: int | None,
                 peers: str, join: str, advertised_host: str) -> list[WorkerSpec]:
    """The N workers of a node (module doc). `advertised_host` is where worker 1's
    cluster port is reached from the others, unless `peers` names it."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    base = cluster_port or DEFAULT_CLUSTER_PORT
    if base + workers - 1 > 65535:
        raise ValueError(f"cluster ports {base}..{base + workers - 1} go past 65535")
    listed = {peer.name: peer for peer in (*parse_peers(peers), *parse_peers(join))}
    own = listed.pop(node_name, None)
    # Where the others reach this host: as the node's own entry in --peers says, else
    # as worker 1 advertises itself.
    host = _host(own.host if own is not None else advertised_host)
    seeds = [f"{node_name}@{host}:{base}",
             *(f"{peer.name}@{_host(peer.host)}:{peer.port}" for peer in listed.values())]
    specs = [WorkerSpec(1, node_name, data_dir, base, peers, join)]
    for index in range(2, workers + 1):
        name, port = worker_name(node_name, index), base + index - 1
        specs.append(WorkerSpec(
            index, name, os.path.join(data_dir, WORKERS_DIRECTORY, f"w{index}"), port,
            f"{name}@{host}:{port}", ",".join(seeds)))
    return specs


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
