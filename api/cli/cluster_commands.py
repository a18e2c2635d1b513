"""`logbroker cluster status | join | leave | forget-node`: the cluster's membership.

Each runs against the node given by `--url` (any member; several URLs fail
over, except for `leave`, which needs the one node that leaves):

    logbroker cluster status                 # every member: role, up/down since, leader;
                                             # every host: zone, workers, how many up
    logbroker cluster status --json          # the raw GET /api/cluster document
    logbroker cluster join n4@10.0.0.4:25672 # add n4 (started with --join) as a member
    logbroker --url http://admin:pw@n2:15672 cluster leave   # n2 leaves the cluster
    logbroker cluster forget-node n3         # remove n3 (gone for good) from the membership
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from api.cli.options import UsageError
from api.cli.tables import format_table

if TYPE_CHECKING:  # the parser imports this module for its usage text: no httpx
    from api.client import Client

DEFAULT_CLUSTER_PORT = 25672
STATUS_COLUMNS = ("name", "address", "role", "status", "since", "leader", "connected",
                  "queue_leaders")
HOST_COLUMNS = ("host", "zone", "workers", "up")


def parse_member(text: str, default_port: int = DEFAULT_CLUSTER_PORT) -> tuple[str, str, int]:
    """(name, host, cluster port) of `NAME@HOST[:PORT]`.

    The name is everything before the last `@` (so `logbroker@box@10.0.0.4:25672`
    is the node `logbroker@box`); an IPv6 host is written in brackets.
    """
    name, sep, address = text.strip().rpartition("@")
    if not sep or not name or not address:
        raise UsageError(f"expected NAME@HOST:PORT (e.g. n4@10.0.0.4:25672), not {text!r}")
    port_text = ""
    if address.startswith("["):
        host, bracket, rest = address[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise UsageError(f"bad address in {text!r}: write an IPv6 host as [::1]:25672")
        port_text = rest[1:]
    elif address.count(":") == 1:
        host, _, port_text = address.partition(":")
    elif ":" in address:
        raise UsageError(f"bad address in {text!r}: write an IPv6 host as [::1]:25672")
    else:
        host = address
    if not host:
        raise UsageError(f"no host in {text!r}")
    if not port_text:
        return name, host, default_port
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise UsageError(f"bad cluster port {port_text!r} in {text!r}")
    return name, host, int(port_text)


def age(since_ms: Any, now_ms: int) -> str:
    """How long ago: `45s ago`, `12m ago`, `3h05m ago`, `2d04h ago` ('' if unknown)."""
    if not isinstance(since_ms, int) or isinstance(since_ms, bool) or since_ms <= 0:
        return ""
    seconds = max(0, now_ms - since_ms) // 1000
    if seconds < 60:
        text = f"{seconds}s"
    elif seconds < 3600:
        text = f"{seconds // 60}m"
    elif seconds < 86400:
        text = f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    else:
        text = f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"
    return f"{text} ago"


def _address(member: Mapping[str, Any]) -> str:
    host, port = member.get("host") or "", member.get("cluster_port")
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}" if port is not None else host


def status_rows(status: Mapping[str, Any], now_ms: int) -> list[list[Any]]:
    leader = status.get("leader")
    rows = []
    for member in status.get("nodes") or ():
        rows.append([member.get("name"), _address(member), member.get("role"),
                     member.get("status"), age(member.get("since_ms"), now_ms),
                     "*" if leader is not None and member.get("name") == leader else "",
                     member.get("connected"), member.get("queue_leaders")])
    return rows


def render_status(status: Mapping[str, Any], now_ms: int | None = None) -> str:
    """A heading (cluster, leader, term; which node answered), one row per member, then
    one row per host (machine): its zone, its workers (members), how many are up."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    node = status.get("node")
    if status.get("clustered") is False:
        heading = (f"node {node} is not clustered (a cluster of one; start it with --peers "
                   f"or --join)")
    else:
        heading = (f"cluster {status.get('cluster_name')}: leader "
                   f"{status.get('leader') or '(none: no quorum?)'}, term {status.get('term')}, "
                   f"commit index {status.get('commit_index')}, applied index "
                   f"{status.get('applied_index')} (as seen by {node})")
    hosts = [[host.get("host_id"), host.get("zone") or "", ", ".join(host.get("workers", ())),
              f"{host.get('up')}/{len(host.get('workers', ()))}"]
             for host in status.get("hosts") or ()]
    text = heading + "\n" + format_table(STATUS_COLUMNS, status_rows(status, now))
    if hosts:  # older nodes do not say
        text += "\n\nhosts and their workers:\n" + format_table(HOST_COLUMNS, hosts)
    return text


def status(client: Client, args: argparse.Namespace) -> int:
    document = client.cluster_status()
    if args.json:
        print(json.dumps(document, indent=2, sort_keys=True))
    else:
        print(render_status(document))
    return 0


def join(client: Client, args: argparse.Namespace) -> int:
    name, host, port = parse_member(args.member)
    client.add_cluster_node(name, host, port)
    print(f"node {name!r} ({host}:{port}) is a member of the cluster")
    return 0


def leave(client: Client, _args: argparse.Namespace) -> int:
    if len(client.nodes) != 1:
        raise UsageError("cluster leave: give exactly one --url, the node that leaves "
                         f"(not {len(client.nodes)})")
    name = str(client.cluster_status()["node"])
    client.remove_cluster_node(name)
    print(f"node {name!r} left the cluster")
    return 0


def forget_node(client: Client, args: argparse.Namespace) -> int:
    client.remove_cluster_node(args.name)
    print(f"node {args.name!r} removed from the cluster")
    return 0
