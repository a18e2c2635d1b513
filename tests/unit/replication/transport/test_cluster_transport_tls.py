"""The cluster link over mutual TLS: nodes with certificates from the cluster's CA link up;
a node whose certificate another CA signed is refused and logged, whatever its secret."""

import asyncio
import logging
import random
import ssl
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import trustme

from logbroker.tls_options import TlsOptions
from replication.transport import ClusterTransport, PeerAddress, TransportLimits

pytestmark = pytest.mark.timeout(15)

SECRET = b"test-cluster-secret"
FAST = TransportLimits(handshake_timeout_s=1.0, reconnect_min_s=0.01, reconnect_max_s=0.05)


def link_contexts(ca: trustme.CA, trusted: trustme.CA, name: str,
                  directory: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A node's contexts: its certificate from `ca`, peers checked against `trusted`."""
    leaf = ca.issue_cert(name, common_name=name)
    cert, key, bundle = (directory / f"{name}.pem", directory / f"{name}.key",
                         directory / f"{name}-ca.pem")
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    trusted.cert_pem.write_to_path(str(bundle))
    return TlsOptions(str(cert), str(key), str(bundle), verify="peer").link_contexts()


class TlsNode:
    def __init__(self, name: str, tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
        self.name = name
        self.frames: dict[str, list[bytes]] = defaultdict(list)
        self.transport = ClusterTransport(
            name, SECRET, host="127.0.0.1", port=0,
            on_frame=lambda peer, payload: self.frames[peer].append(payload),
            limits=FAST, rng=random.Random(name), tls=tls)

    @property
    def address(self) -> PeerAddress:
        return PeerAddress(self.name, "127.0.0.1", self.transport.port)


@pytest.fixture
async def started() -> AsyncIterator[list[TlsNode]]:
    nodes: list[TlsNode] = []
    yield nodes
    for node in nodes:
        await node.transport.stop()


async def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def start(started: list[TlsNode], name: str,
                tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> TlsNode:
    node = TlsNode(name, tls)
    await node.transport.start()
    started.append(node)
    return node


async def test_nodes_of_one_ca_link_over_tls(started: list[TlsNode], tmp_path: Path) -> None:
    ca = trustme.CA()
    a = await start(started, "n1", link_contexts(ca, ca, "n1", tmp_path))
    b = await start(started, "n2", link_contexts(ca, ca, "n2", tmp_path))
    a.transport.set_peers([b.address])
    await wait_until(lambda: a.transport.is_connected("n2") and b.transport.is_connected("n1"))
    assert a.transport.send("n2", b"over tls") and b.transport.send("n1", b"and back")
    await wait_until(lambda: b.frames["n1"] == [b"over tls"] and a.frames["n2"] == [b"and back"])


@pytest.mark.parametrize("foreign_dials", [True, False])
async def test_a_foreign_certificate_is_refused_and_logged(
        started: list[TlsNode], tmp_path: Path, caplog: pytest.LogCaptureFixture,
        foreign_dials: bool) -> None:
    caplog.set_level(logging.WARNING, logger="replication.transport")
    ca, other = trustme.CA(), trustme.CA()
    member = await start(started, "n1", link_contexts(ca, ca, "n1", tmp_path))
    # Signed by another CA, though it trusts the cluster's CA and knows the secret.
    intruder = await start(started, "n9", link_contexts(other, ca, "n9", tmp_path))
    dialer, target = (intruder, member) if foreign_dials else (member, intruder)
    dialer.transport.set_peers([target.address])
    await wait_until(lambda: member.transport.stats().handshake_failures
                     + intruder.transport.stats().handshake_failures >= 2)
    assert not member.transport.is_connected("n9") and not intruder.transport.is_connected("n1")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    refused = "refused cluster connection from" if foreign_dials else "cannot connect to"
    assert any(refused in m and "certificate" in m.lower() for m in warnings), warnings
