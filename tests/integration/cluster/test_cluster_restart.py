"""A whole 3-node cluster restarted at once (a power cut): from the moment a node's
AMQP or HTTP port takes a TCP connection, a valid login is never refused as invalid.

Until a restarted node has loaded the cluster's definitions (users included) it
cannot check a password; pika, kombu and Celery take a 403 as final and give up.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx
import pika
import pika.exceptions

from tests.integration.cluster.cluster_nodes import (
    START_TIMEOUT_S,
    Node,
    ready,
    running_cluster,
)
from tests.integration.conftest import wait_for

PROBE_S = 3.0  # how long each port is probed once it accepts connections
LOGINS_WANTED = 5  # ... or until this many logins went through after a refusal-free start


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _probe_amqp(node: Node, refusals: list[str], deadline: float) -> None:
    while not _accepts(node.amqp_port):  # a refused TCP connect before listening is fine
        if time.monotonic() > deadline:
            refusals.append(f"{node.name}: AMQP port never listened")
            return
        time.sleep(0.005)
    parameters = pika.ConnectionParameters(
        "127.0.0.1", node.amqp_port, connection_attempts=1, socket_timeout=10,
        stack_timeout=15, credentials=pika.PlainCredentials("guest", "guest"))
    logins, until = 0, time.monotonic() + PROBE_S
    while logins < LOGINS_WANTED and time.monotonic() < until:
        try:
            pika.BlockingConnection(parameters).close()
            logins += 1
        except pika.exceptions.AMQPConnectionError as error:
            text = repr(error)
            if "403" in text or "ACCESS_REFUSED" in text or "Authentication" in text:
                refusals.append(f"{node.name} AMQP: {text}")
                return
    if logins == 0:
        refusals.append(f"{node.name} AMQP: no login went through in {PROBE_S} s")


def _probe_http(node: Node, refusals: list[str], deadline: float) -> None:
    while not _accepts(node.http_port):
        if time.monotonic() > deadline:
            refusals.append(f"{node.name}: HTTP port never listened")
            return
        time.sleep(0.005)
    logins, until = 0, time.monotonic() + PROBE_S
    while logins < LOGINS_WANTED and time.monotonic() < until:
        try:
            reply = httpx.get(f"{node.url}/api/whoami", auth=("guest", "guest"), timeout=15.0)
        except httpx.HTTPError:
            continue
        if reply.status_code == 401:
            refusals.append(f"{node.name} HTTP: 401 {reply.text}")
            return
        logins += reply.status_code == 200


def test_a_restarted_cluster_never_refuses_valid_logins(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as nodes:
        for node in nodes:
            node.kill()
        refusals: list[str] = []
        deadline = time.monotonic() + START_TIMEOUT_S
        probes = [threading.Thread(target=probe, args=(node, refusals, deadline))
                  for node in nodes for probe in (_probe_amqp, _probe_http)]
        for probe in probes:
            probe.start()
        for node in nodes:
            node.start()
        for probe in probes:
            probe.join()
        assert refusals == []
        wait_for(lambda: ready(nodes), "the cluster to re-form", START_TIMEOUT_S)
        assert "user '' " not in nodes[0].log()
