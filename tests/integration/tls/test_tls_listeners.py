"""AMQPS, HTTPS and WSS on a real broker, with a test CA (trustme) and real clients.

One broker verifies peers (client certificates optional: PLAIN and EXTERNAL both
work), a second one requires a certificate and has plain AMQP turned off.
"""

from __future__ import annotations

import asyncio
import base64
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aio_pika
import httpx
import kombu
import pika
import pytest
import trustme
import websockets
from pika.credentials import ExternalCredentials

from api.client import Client, ConnectionFailed, client_tls_context
from tests.integration.conftest import BrokerProcess, free_port, start_broker, wait_for


class Pki:
    """A CA, the broker's certificate for 127.0.0.1 and a client certificate for guest."""

    def __init__(self, directory: Path) -> None:
        self.ca = trustme.CA()
        self.ca_file = directory / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        server = self.ca.issue_cert("127.0.0.1", "localhost", common_name="broker")
        self.server_cert, self.server_key = directory / "server.pem", directory / "server.key"
        server.private_key_pem.write_to_path(str(self.server_key))
        server.cert_chain_pems[0].write_to_path(str(self.server_cert))
        for blob in server.cert_chain_pems[1:]:
            blob.write_to_path(str(self.server_cert), append=True)
        client = self.ca.issue_cert("guest@clients", common_name="guest")
        self.client_cert, self.client_key = directory / "client.pem", directory / "client.key"
        client.private_key_pem.write_to_path(str(self.client_key))
        client.cert_chain_pems[0].write_to_path(str(self.client_cert))

    def flags(self, *extra: str) -> tuple[str, ...]:
        return ("--tls-cert", str(self.server_cert), "--tls-key", str(self.server_key),
                "--tls-ca", str(self.ca_file), "--amqps-port", str(free_port()),
                "--https-port", str(free_port()), *extra)

    def client_context(self, with_certificate: bool) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        if with_certificate:
            context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context


def tls_ports(broker: BrokerProcess) -> tuple[int, int]:
    overview = httpx.get(f"{broker.url}/api/overview", auth=("guest", "guest")).json()
    ports = {listener["protocol"]: listener["port"] for listener in overview["listeners"]}
    return ports["amqp/ssl"], ports["https"]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_broker(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("tls") / "data",
                          *pki.flags("--tls-verify", "peer"))
    try:
        yield broker
    finally:
        broker.stop()


def pika_round_trip(port: int, context: ssl.SSLContext,
                    credentials: pika.credentials.VALID_TYPES) -> bytes:
    parameters = pika.ConnectionParameters(
        "127.0.0.1", port, credentials=credentials,
        ssl_options=pika.SSLOptions(context, "127.0.0.1"))
    with pika.BlockingConnection(parameters) as connection:
        channel = connection.channel()
        channel.queue_declare("tls-pika", auto_delete=True)
        channel.confirm_delivery()
        channel.basic_publish("", "tls-pika", b"over tls")
        _method, _properties, body = next(channel.consume("tls-pika", inactivity_timeout=5))
        assert body is not None
        return body


def test_pika_over_amqps_with_a_verified_server(pki: Pki, tls_broker: BrokerProcess) -> None:
    amqps_port, _ = tls_ports(tls_broker)
    body = pika_round_trip(amqps_port, pki.client_context(with_certificate=False),
                           pika.PlainCredentials("guest", "guest"))
    assert body == b"over tls"


def test_a_client_that_does_not_verify_still_gets_tls(tls_broker: BrokerProcess) -> None:
    """A client with verification off (a trial, a self-signed broker) connects; the
    channel is still encrypted."""
    amqps_port, _ = tls_ports(tls_broker)
    unverified = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE
    body = pika_round_trip(amqps_port, unverified, pika.PlainCredentials("guest", "guest"))
    assert body == b"over tls"


def test_external_login_takes_the_user_from_the_certificate(
        pki: Pki, tls_broker: BrokerProcess) -> None:
    amqps_port, _ = tls_ports(tls_broker)
    body = pika_round_trip(amqps_port, pki.client_context(with_certificate=True),
                           ExternalCredentials())
    assert body == b"over tls"
    parameters = pika.ConnectionParameters(
        "127.0.0.1", amqps_port, credentials=ExternalCredentials(),
        ssl_options=pika.SSLOptions(pki.client_context(with_certificate=True), "127.0.0.1"))
    with pika.BlockingConnection(parameters):
        connections = httpx.get(f"{tls_broker.url}/api/connections",
                                auth=("guest", "guest")).json()
    assert [(c["user"], c["auth_mechanism"], c["ssl"]) for c in connections] == [
        ("guest", "EXTERNAL", True)]


def test_external_login_without_a_certificate_is_refused(
        pki: Pki, tls_broker: BrokerProcess) -> None:
    amqps_port, _ = tls_ports(tls_broker)
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        pika_round_trip(amqps_port, pki.client_context(with_certificate=False),
                        ExternalCredentials())


def test_a_client_trusting_another_ca_refuses_the_broker(tls_broker: BrokerProcess) -> None:
    amqps_port, https_port = tls_ports(tls_broker)
    foreign = ssl.create_default_context()
    trustme.CA().configure_trust(foreign)
    with pytest.raises(ssl.SSLCertVerificationError), \
            socket.create_connection(("127.0.0.1", amqps_port), timeout=5) as raw:
        foreign.wrap_socket(raw, server_hostname="127.0.0.1")
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"https://127.0.0.1:{https_port}/api/overview", verify=foreign)


def test_aio_pika_and_kombu_over_amqps(pki: Pki, tls_broker: BrokerProcess) -> None:
    amqps_port, _ = tls_ports(tls_broker)

    async def aio_pika_round_trip() -> bytes:
        connection = await aio_pika.connect_robust(
            f"amqps://guest:guest@127.0.0.1:{amqps_port}/",
            ssl_context=pki.client_context(with_certificate=False))
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue("tls-aio", auto_delete=True)
            await channel.default_exchange.publish(aio_pika.Message(b"aio"), "tls-aio")
            message = await queue.get(timeout=5)
            await message.ack()
            return message.body

    assert asyncio.run(aio_pika_round_trip()) == b"aio"
    ssl_options = {"ca_certs": str(pki.ca_file), "cert_reqs": ssl.CERT_REQUIRED,
                   "server_hostname": "127.0.0.1"}
    with kombu.Connection(f"amqps://guest:guest@127.0.0.1:{amqps_port}//",
                          ssl=ssl_options) as connection:
        queue = connection.SimpleQueue("tls-kombu")
        queue.put({"kombu": True})
        message = queue.get(timeout=5)
        message.ack()
        assert message.payload == {"kombu": True}
        queue.close()


def test_https_and_wss(pki: Pki, tls_broker: BrokerProcess) -> None:
    _, https_port = tls_ports(tls_broker)
    context = pki.client_context(with_certificate=False)
    overview = httpx.get(f"https://127.0.0.1:{https_port}/api/overview",
                         auth=("guest", "guest"), verify=context)
    assert overview.status_code == 200
    protocols = {listener["protocol"] for listener in overview.json()["listeners"]}
    assert protocols == {"amqp", "amqp/ssl", "http", "https"}

    async def wss_handshake() -> None:
        async with websockets.connect(
                f"wss://127.0.0.1:{https_port}/ws", ssl=context,
                additional_headers={"Authorization": "Basic "
                                    + base64.b64encode(b"guest:guest").decode()}) as ws:
            await ws.ping()

    asyncio.run(wss_handshake())


def test_a_required_certificate_and_no_plain_amqp(
        pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> None:
    broker = start_broker(tmp_path_factory.mktemp("tls-required") / "data",
                          *pki.flags("--tls-verify", "peer", "--tls-fail-if-no-peer-cert",
                                     "--amqp-port", "0"))
    try:
        amqps_port, _ = tls_ports(broker)
        assert {p for p, _ in _listeners(broker)} == {"amqp/ssl", "http", "https"}
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", broker.amqp_port), timeout=5).close()
        with pytest.raises((pika.exceptions.AMQPConnectionError, ssl.SSLError)):
            pika_round_trip(amqps_port, pki.client_context(with_certificate=False),
                            pika.PlainCredentials("guest", "guest"))
        body = pika_round_trip(amqps_port, pki.client_context(with_certificate=True),
                               pika.PlainCredentials("guest", "guest"))
        assert body == b"over tls"
    finally:
        broker.stop()


def _listeners(broker: BrokerProcess) -> list[tuple[str, int]]:
    overview = httpx.get(f"{broker.url}/api/overview", auth=("guest", "guest")).json()
    return [(listener["protocol"], listener["port"]) for listener in overview["listeners"]]


def test_the_readme_tls_section_works_as_written(tmp_path: Path) -> None:
    """examples/tls/make_test_ca.sh, then the README's broker flags and pika snippet."""
    script = Path(__file__).resolve().parents[3] / "examples" / "tls" / "make_test_ca.sh"
    subprocess.run(["sh", str(script), str(tmp_path / "tls"), "127.0.0.1", "guest"],
                   check=True, capture_output=True, timeout=60)
    pem = tmp_path / "tls"
    amqps_port = free_port()
    broker = start_broker(tmp_path / "data", "--tls-cert", str(pem / "server.pem"),
                          "--tls-key", str(pem / "server.key"), "--tls-ca", str(pem / "ca.pem"),
                          "--tls-verify", "peer", "--amqps-port", str(amqps_port),
                          "--https-port", str(free_port()))
    try:
        context = ssl.create_default_context(cafile=str(pem / "ca.pem"))
        context.load_cert_chain(str(pem / "client.pem"), str(pem / "client.key"))
        assert pika_round_trip(amqps_port, context, ExternalCredentials()) == b"over tls"
    finally:
        broker.stop()


def test_the_python_client_and_the_cli_over_https_and_wss(
        pki: Pki, tls_broker: BrokerProcess) -> None:
    _, https_port = tls_ports(tls_broker)
    url = f"https://guest:guest@127.0.0.1:{https_port}"
    tls = client_tls_context(str(pki.ca_file), str(pki.client_cert), str(pki.client_key))
    with Client(url, tls=tls) as client:
        client.declare_queue("tls-client")
        client.publish("", "tls-client", b"https")
        with client.consume("tls-client", prefetch=1) as consumer:  # a WSS stream
            delivery = next(consumer)
            delivery.ack()
        assert delivery.body == b"https"
    with Client(url) as untrusting, pytest.raises(ConnectionFailed):
        untrusting.overview()  # the system's CAs do not know the test CA
    cli = [sys.executable, "-m", "logbroker", "--url", url, "list", "queues"]
    listed = subprocess.run([*cli, "--ca-file", str(pki.ca_file)], capture_output=True,
                            text=True, timeout=60)
    assert listed.returncode == 0 and "tls-client" in listed.stdout, listed.stderr
    refused = subprocess.run(cli, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 3 and "certificate verify failed" in refused.stderr


def served_common_name(port: int, context: ssl.SSLContext) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        subject = dict(item[0] for item in tls.getpeercert()["subject"])  # type: ignore[index]
        return str(subject["commonName"])


def test_sighup_reloads_the_certificate_for_new_connections(tmp_path: Path) -> None:
    (tmp_path / "pki").mkdir()
    pki = Pki(tmp_path / "pki")  # its own files: this test rewrites them
    broker = start_broker(tmp_path / "data", *pki.flags())
    try:
        amqps_port, _ = tls_ports(broker)
        context = pki.client_context(with_certificate=False)
        assert served_common_name(amqps_port, context) == "broker"
        renewed = pki.ca.issue_cert("127.0.0.1", common_name="broker-renewed")
        renewed.private_key_pem.write_to_path(str(pki.server_key))
        renewed.cert_chain_pems[0].write_to_path(str(pki.server_cert))
        broker.process.send_signal(signal.SIGHUP)
        wait_for(lambda: served_common_name(amqps_port, context) == "broker-renewed",
                 "the renewed certificate to be served", 10)
        pki.server_key.write_text("not a key")  # a bad file: the node keeps the old pair
        broker.process.send_signal(signal.SIGHUP)
        wait_for(lambda: "TLS files not reloaded" in broker.log(), "the refusal", 10)
        assert served_common_name(amqps_port, context) == "broker-renewed"
    finally:
        broker.stop()


def test_external_login_from_a_subject_alternative_name(pki: Pki, tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data", *pki.flags(
        "--tls-verify", "peer", "--tls-login-from", "subject_alternative_name",
        "--tls-login-san-type", "email"))
    try:
        with httpx.Client(base_url=broker.url, auth=("guest", "guest")) as http:
            assert http.put("/api/users/app@example.com",
                            json={"password": "unused", "tags": ""}).status_code == 201
            assert http.put("/api/permissions/%2F/app@example.com", json={
                "configure": ".*", "write": ".*", "read": ".*"}).status_code == 201
        leaf = pki.ca.issue_cert("app@example.com", common_name="someone-else")
        cert, key = tmp_path / "app.pem", tmp_path / "app.key"
        leaf.cert_chain_pems[0].write_to_path(str(cert))
        leaf.private_key_pem.write_to_path(str(key))
        context = ssl.create_default_context(cafile=str(pki.ca_file))
        context.load_cert_chain(str(cert), str(key))
        amqps_port, _ = tls_ports(broker)
        parameters = pika.ConnectionParameters(
            "127.0.0.1", amqps_port, credentials=ExternalCredentials(),
            ssl_options=pika.SSLOptions(context, "127.0.0.1"))
        with pika.BlockingConnection(parameters):
            users = [c["user"] for c in httpx.get(f"{broker.url}/api/connections",
                                                  auth=("guest", "guest")).json()]
        assert users == ["app@example.com"]
    finally:
        broker.stop()
