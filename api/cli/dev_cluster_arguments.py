"""`logbroker dev-cluster --nodes 3`: a local cluster on 127.0.0.1, for trying it on one machine.

Starts N `python -m logbroker serve` processes named n1..nN. Node nI listens on
AMQP `--amqp-base + I - 1`, HTTP `--http-base + I - 1` and cluster
`--cluster-base + I - 1` (3 nodes: 5672-5674, 15672-15674, 25672-25674), keeps its
data in `BASE_DIR/nI` and logs to `BASE_DIR/nI.log`; every node gets the same
`--peers` list and the shared secret file `BASE_DIR/cluster-secret` (mode 0600,
created once and reused, so the cluster restarts with its data). Once every node
answers `GET /api/cluster` it prints their URLs and waits for Ctrl-C or
SIGTERM, then stops them all (SIGTERM, then SIGKILL after 10 s).

Stop one node (`kill PID`, the PIDs are printed) to watch a failover.
"""

from __future__ import annotations

import argparse

MAX_NODES = 9


def node_count(text: str) -> int:
    """--nodes: 1 to 9."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 1 <= value <= MAX_NODES:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_NODES}")
    return value


def port_base(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= value <= 65535 - MAX_NODES:
        raise argparse.ArgumentTypeError(f"must be between 1 and {65535 - MAX_NODES}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=node_count, default=3, metavar="N",
                        help=f"how many nodes, 1 to {MAX_NODES} (default: 3)")
    parser.add_argument("--base-dir", default="./logbroker-dev-cluster", metavar="DIR",
                        help="data dirs DIR/nI, logs DIR/nI.log and the shared secret "
                             "(default: ./logbroker-dev-cluster)")
    parser.add_argument("--amqp-base", type=port_base, default=5672, metavar="PORT",
                        help="AMQP port of n1; nI gets PORT+I-1 (default: 5672)")
    parser.add_argument("--http-base", type=port_base, default=15672, metavar="PORT",
                        help="HTTP port of n1 (default: 15672)")
    parser.add_argument("--cluster-base", type=port_base, default=25672, metavar="PORT",
                        help="cluster port of n1 (default: 25672)")
