"""A 3-node cluster whose links run over mutual TLS, and a node with a foreign certificate
kept out: real `logbroker serve` processes on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pika
import pytest
import trustme

from tests.integration.cluster.cluster_nodes import running_cluster
from tests.integration.conftest import free_port, wait_for

pytestmark = pytest.mark.slow


def certificate_flags(ca: trustme.CA, directory: Path, name: str,
                      trusted: trustme.CA | None = None) -> tuple[str, ...]:
    """A node's flags: its certificate signed by `ca`, peers checked against `trusted`."""
    directory.mkdir(parents=True, exist_ok=True)
    leaf = ca.issue_cert("127.0.0.1", common_name=name)
    cert, key, bundle = directory / "node.pem", directory / "node.key", directory / "ca.pem"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    (trusted or ca).cert_pem.write_to_path(str(bundle))
    return ("--tls-cert", str(cert), "--tls-key", str(key), "--tls-ca", str(bundle),
            "--cluster-tls", "--amqps-port", str(free_port()), "--https-port", str(free_port()))


def test_a_cluster_over_tls_links_replicates_and_keeps_a_foreign_node_out(
        tmp_path: Path) -> None:
    ca = trustme.CA()
    with running_cluster(tmp_path, extra=lambda name: certificate_flags(
            ca, tmp_path / "pki" / name, name)) as nodes:
        first, last = nodes[0], nodes[-1]
        connection = first.amqp()
        channel = connection.channel()
        channel.queue_declare("over-tls-links", durable=True,
                              arguments={"x-queue-replicas": 3})
        channel.confirm_delivery()
        for index in range(20):
            channel.basic_publish("", "over-tls-links", f"m{index}".encode(),
                                  pika.BasicProperties(delivery_mode=2), mandatory=True)
        connection.close()
        bodies: set[bytes] = set()

        def drained_through_another_node() -> bool:
            """Everything, read on another node (forwarded over a TLS link). A loaded
            machine may see a link reconnect meanwhile: the read is then tried again."""
            try:
                connection = last.amqp()
            except pika.exceptions.AMQPError:
                return False
            try:
                channel = connection.channel()
                while (got := channel.basic_get("over-tls-links"))[0] is not None:
                    bodies.add(got[2])
                    channel.basic_ack(got[0].delivery_tag)  # a broken read requeues it
                connection.close()
            except pika.exceptions.AMQPError:
                return False
            return len(bodies) >= 20

        wait_for(drained_through_another_node, "every message through another node", 60)
        assert bodies == {f"m{index}".encode() for index in range(20)}

        # Signed by another CA, though it trusts the cluster's CA and knows the secret.
        intruder_flags = certificate_flags(trustme.CA(), tmp_path / "foreign", "n9", ca)
        secret = tmp_path / "secret"  # even the right secret does not let it in
        log = tmp_path / "n9.log"
        with open(log, "wb") as output:
            intruder = subprocess.Popen(
                [sys.executable, "-m", "logbroker", "serve", "--workers", "1", "--node-name", "n9",
                 "--data-dir", str(tmp_path / "n9"), "--host", "127.0.0.1",
                 "--amqp-port", str(free_port()), "--http-port", str(free_port()),
                 "--cluster-port", str(free_port()), "--cluster-secret-file", str(secret),
                 "--join", f"{first.name}@127.0.0.1:{first.cluster_port}", *intruder_flags],
                stdout=output, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: any("refused cluster connection" in line and "certificate" in line
                                 for line in first.log().splitlines()),
                     "the member to refuse the foreign certificate", 30)
            time.sleep(1)
            status = first.status()
            assert status is not None and {n["name"] for n in status["nodes"]} == {
                node.name for node in nodes}
        finally:
            intruder.terminate()
            intruder.wait(30)
