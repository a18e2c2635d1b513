"""Ports for the servers a benchmark (or a fault test) starts, below the kernel's
ephemeral range.

A port found free by binding to port 0 comes from the ephemeral range, where
the kernel also picks the local ports of outgoing connections: between the
probe and the server's own bind, a connection (one node dialling another) can
take it, and the server fails with EADDRINUSE. That happened once in about 20
`cluster_bench.py` runs, and the nemesis tests' restarted nodes met it too (a
proxy dialing a down node connected to itself on its port). Ports below the
range are only ever taken by a bind.
"""

from __future__ import annotations

import random
import socket

HOST = "127.0.0.1"
RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
SPAN = 12_000
ATTEMPTS_MAX = 1_000
_handed_out: set[int] = set()


def _ephemeral_low() -> int:
    try:
        with open(RANGE_FILE) as file:
            return int(file.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port() -> int:
    """A port nothing listens on now, and not handed out before by this process."""
    high = _ephemeral_low()
    low = max(1024, high - SPAN)
    for _ in range(ATTEMPTS_MAX if high - low > 100 else 0):
        port = random.randrange(low, high)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind((HOST, port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as sock:  # no room below the range: the old way
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def free_port_run(count: int) -> int:
    """The first of `count` consecutive free ports (a node's workers' cluster ports)."""
    for _ in range(ATTEMPTS_MAX):
        first = free_port()
        if all(_bindable(first + offset) for offset in range(1, count)):
            _handed_out.update(range(first, first + count))
            return first
    raise OSError(f"no {count} consecutive free ports found")


def _bindable(port: int) -> bool:
    if port in _handed_out or port > 65535:
        return False
    with socket.socket() as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True
