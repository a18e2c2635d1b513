"""Throw at least 10,000 random and mutated frames at a real `logbroker serve`.

Each fuzz connection does a valid handshake (so the frames reach the channel
layer), then sends a burst of frames: random bytes, valid frames with flipped
bytes, valid method frames with random arguments, content frames out of
order. Afterwards the node must still be running, every connection the
server ended must have been ended with a connection.close carrying a valid
AMQP reply code (or a plain socket close, which RabbitMQ also does for a
peer it cannot parse), and a real client must still work.
"""

from __future__ import annotations

import contextlib
import random
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pamqp import commands, frame, header

from bench.free_ports import free_port
from logbroker.metadata.reply_codes import ReplyCode
from tests.fuzz_budget import budget

pytestmark = [pytest.mark.slow, pytest.mark.fuzz]

REPO_ROOT = Path(__file__).resolve().parents[2]
FRAMES_TOTAL = budget(10_000, 50_000)
FRAMES_PER_CONNECTION = 40
SEED = 20261122
VALID_CODES = {code.value for code in ReplyCode}


@pytest.fixture(scope="module")
def broker_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = free_port()
    data_dir = tmp_path_factory.mktemp("fuzz-data")
    # The server's log goes to a file: a pipe nobody reads would fill and stall it.
    log_path = data_dir / "serve.log"
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "logbroker", "serve", "--workers", "1",
             "--data-dir", str(data_dir / "data"),
             "--amqp-port", str(port), "--http-port", str(free_port()), "--host", "127.0.0.1"],
            cwd=REPO_ROOT, stdout=log_file, stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert process.poll() is None, log_path.read_text()
            time.sleep(0.1)
    else:
        process.kill()
        pytest.fail("logbroker serve did not start listening within 30 s")
    yield port
    assert process.poll() is None, "the broker died during the fuzz test"
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)


def marshal(channel: int, value: object) -> bytes:
    return bytes(frame.marshal(value, channel))  # type: ignore[arg-type]


def handshake_frames() -> bytes:
    plain = "\0guest\0guest"
    return b"".join([
        bytes(header.ProtocolHeader().marshal()),
        marshal(0, commands.Connection.StartOk(
            client_properties={"capabilities": {"authentication_failure_close": True}},
            mechanism="PLAIN", response=plain)),
        marshal(0, commands.Connection.TuneOk(channel_max=64, frame_max=131072, heartbeat=0)),
        marshal(0, commands.Connection.Open(virtual_host="/")),
        marshal(1, commands.Channel.Open()),
    ])


VALID_METHODS = [
    commands.Queue.Declare(queue="fuzz"),
    commands.Exchange.Declare(exchange="fuzz-x", exchange_type="topic"),
    commands.Queue.Bind(queue="fuzz", exchange="fuzz-x", routing_key="#"),
    commands.Basic.Qos(prefetch_count=5),
    commands.Basic.Get(queue="fuzz"),
    commands.Basic.Ack(delivery_tag=1),
    commands.Basic.Consume(queue="fuzz"),
    commands.Confirm.Select(),
    commands.Tx.Select(),
    commands.Basic.Publish(exchange="fuzz-x", routing_key="a.b"),
]


def fuzz_frame(rng: random.Random) -> bytes:
    kind = rng.randrange(5)
    if kind == 0:
        return rng.randbytes(rng.randrange(1, 64))
    valid = marshal(rng.choice([0, 1, 1, 2]), rng.choice(VALID_METHODS))
    if kind == 1:
        return valid
    if kind == 2:
        mutated = bytearray(valid)
        for _ in range(rng.randrange(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        return bytes(mutated)
    if kind == 3:  # a frame header that promises a different size
        size = rng.choice([0, 1, 2**31, 131072 + 1, rng.randrange(1 << 20)])
        return struct.pack(">BHI", rng.choice([1, 2, 3, 8, 9]), 1, size) + rng.randbytes(8)
    body = rng.randbytes(rng.randrange(0, 300))  # content without (or with) its method
    return marshal(1, header.ContentHeader(0, len(body), commands.Basic.Properties())) + (
        struct.pack(">BHI", 3, 1, len(body)) + body + b"\xce")


def read_until_closed(sock: socket.socket, timeout_s: float) -> bytes:
    sock.settimeout(timeout_s)
    received = bytearray()
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return bytes(received)


def close_codes(data: bytes) -> list[int]:
    """Reply codes of every connection.close the server sent in `data`."""
    codes = []
    position = data.find(b"\x01\x00\x00")  # skip to the first method frame
    while 0 <= position < len(data):
        try:
            consumed, _, value = frame.unmarshal(data[position:])
        except Exception:
            break
        if isinstance(value, commands.Connection.Close):
            codes.append(int(value.reply_code))
        position += consumed
    return codes


def test_random_and_mutated_frames_never_crash_the_node(broker_port: int) -> None:
    rng = random.Random(SEED)
    sent = 0
    ended_by_server = 0
    started = time.monotonic()
    while sent < FRAMES_TOTAL:
        assert time.monotonic() - started < budget(240, 3000), "fuzz test over its time budget"
        with socket.create_connection(("127.0.0.1", broker_port), timeout=5) as sock:
            burst = [fuzz_frame(rng) for _ in range(FRAMES_PER_CONNECTION)]
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(handshake_frames() + b"".join(burst))
            sent += len(burst)
            data = read_until_closed(sock, timeout_s=0.3)
        codes = close_codes(data)
        for code in codes:
            assert code in VALID_CODES, f"connection.close with unknown reply code {code}"
        ended_by_server += bool(codes)
    connections = FRAMES_TOTAL // FRAMES_PER_CONNECTION
    print(f"amqp live fuzz: {sent} frames over {connections} connections (seed {SEED}), "
          f"{ended_by_server} ended by the server with a valid reply code")
    assert ended_by_server > FRAMES_TOTAL // FRAMES_PER_CONNECTION // 2


def test_a_real_client_still_works_after_the_fuzzing(broker_port: int) -> None:
    pika = pytest.importorskip("pika")
    parameters = pika.ConnectionParameters("127.0.0.1", broker_port)
    connection = pika.BlockingConnection(parameters)
    try:
        channel = connection.channel()
        channel.queue_declare("after-fuzz")
        channel.basic_publish("", "after-fuzz", b"still here")
        method, _, body = channel.basic_get("after-fuzz", auto_ack=True)
        assert method is not None and body == b"still here"
    finally:
        connection.close()
