"""Random and mutated input never makes receive_data raise, and always ends well.

"Ends well": the connection is still usable (not closing), or the machine told
the client why it stopped: a connection.close with a valid reply code, our
protocol header after a bad header, close-ok after the client's own close, or
(RabbitMQ's behaviour for clients without authentication_failure_close) a
silent drop after a refused login.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pamqp import commands

from api.amqp import (
    ConnectionClosed,
    ConnectionConfig,
    ConnectionFailed,
    ConnectionState,
    Event,
    OpenRequested,
)
from api.amqp.wire import PROTOCOL_HEADER
from logbroker.metadata.reply_codes import is_connection_error, is_valid_reply_code
from tests.fuzz_budget import budget
from tests.unit.api.amqp.client import CLIENT_CAPABILITIES, Client, marshal, parse, publish_frames

pytestmark = pytest.mark.fuzz

# Three generated-input tests: 3 x 3,400 cases in the full run.
FUZZ = settings(
    max_examples=budget(300, 3_400),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def valid_stream() -> bytes:
    start_ok = commands.Connection.StartOk(
        client_properties={"capabilities": CLIENT_CAPABILITIES},
        mechanism="PLAIN",
        response="\0guest\0guest",
    )
    parts = [
        PROTOCOL_HEADER,
        marshal(0, start_ok),
        marshal(0, commands.Connection.TuneOk(2047, 8192, 60)),
        marshal(0, commands.Connection.Open("/")),
        marshal(1, commands.Channel.Open()),
        marshal(1, commands.Queue.Declare(queue="q", arguments={"x-max-length": 10})),
        publish_frames(1, b"payload " * 300, frame_size=700),
        publish_frames(1, b""),
        marshal(1, commands.Basic.Ack(delivery_tag=1)),
        marshal(1, commands.Channel.Close(200, "bye", 0, 0)),
        marshal(0, commands.Connection.Close(200, "Normal shutdown", 0, 0)),
    ]
    return b"".join(parts)


VALID = valid_stream()
HANDSHAKE_END = VALID.index(marshal(1, commands.Channel.Open()))


def run(chunks: list[bytes]) -> None:
    client = Client(ConnectionConfig(max_message_bytes=100_000))
    events: list[Event] = []
    output = b""
    for chunk in chunks:
        new = client.feed(chunk)
        if any(isinstance(e, OpenRequested) for e in new):
            client.machine.accept_open()
            new += client.machine.next_events()
        events += new
        output += client.machine.data_to_send()
    check(client, events, output)


def check(client: Client, events: list[Event], output: bytes) -> None:
    closes = [e for e in events if isinstance(e, ConnectionClosed)]
    assert len(closes) <= 1
    if closes:
        assert events[-1] is closes[0]
    frames = parse(output)  # the machine's own output is always well formed
    state = client.machine.state
    if state not in (ConnectionState.CLOSING, ConnectionState.CLOSED):
        assert not closes
        return
    failures = [e for e in events if isinstance(e, ConnectionFailed)]
    sent_closes = [f for _, f in frames if isinstance(f, commands.Connection.Close)]
    for close in sent_closes:
        assert is_valid_reply_code(close.reply_code)
    for failure in failures:
        if failure.sent_close:
            assert is_connection_error(failure.reply_code) or failure.reply_code == 403
    if sent_closes:
        return
    if closes and closes[0].by_client:
        assert isinstance(frames[-1][1], commands.Connection.CloseOk)
        return
    [failure] = failures
    if failure.reply_code == 403:  # refused login, client without the capability
        assert [type(f).__name__ for _, f in frames] == ["Start"]
        return
    assert output.endswith(PROTOCOL_HEADER) and failure.reply_code == 0


CASES: collections.Counter[str] = collections.Counter()


@pytest.fixture(scope="module", autouse=True)
def report_cases() -> Iterator[None]:
    yield
    print(f"amqp machine fuzz: {sum(CASES.values())} generated input sequences {dict(CASES)}")


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@FUZZ
@given(st.binary(max_size=2000), st.lists(st.integers(0, 4000), max_size=8))
def test_random_bytes_from_the_start(data: bytes, cuts: list[int]) -> None:
    CASES["random"] += 1
    run(split(data, cuts))


@FUZZ
@given(
    st.binary(min_size=1, max_size=3000),
    st.lists(st.integers(0, 4000), max_size=8),
    st.booleans(),
)
def test_random_bytes_after_the_handshake(data: bytes, cuts: list[int], frame_like: bool) -> None:
    CASES["after handshake"] += 1
    if frame_like:  # make it look like frames more often than not
        data = bytes([data[0] % 9]) + b"\x00" + data[1:]
    run([VALID[:HANDSHAKE_END], *split(data, cuts)])


mutation = st.tuples(
    st.sampled_from(["flip", "set", "insert", "delete"]),
    st.integers(0, len(VALID) - 1),
    st.integers(0, 255),
)


@FUZZ
@given(
    st.lists(mutation, min_size=1, max_size=6),
    st.lists(st.integers(0, len(VALID)), max_size=10),
    st.integers(0, len(VALID)),
)
def test_mutated_valid_streams(
    mutations: list[tuple[str, int, int]], cuts: list[int], truncate_at: int
) -> None:
    CASES["mutated"] += 1
    data = bytearray(VALID)
    for kind, position, value in mutations:
        position %= len(data) or 1
        if kind == "flip" and data:
            data[position] ^= 1 << (value % 8)
        elif kind == "set" and data:
            data[position] = value
        elif kind == "insert":
            data.insert(position, value)
        elif kind == "delete" and data:
            del data[position]
    stream = bytes(data[: max(truncate_at, len(data) // 2)])
    run(split(stream, cuts))


def test_the_unmutated_stream_is_a_clean_session() -> None:
    client = Client(ConnectionConfig(max_message_bytes=100_000))
    events = client.feed(VALID)
    assert events == [OpenRequested("/", "guest")]
    client.machine.accept_open()
    kinds = [type(e).__name__ for e in client.machine.next_events()]
    assert kinds == [
        "ChannelOpened",
        "ChannelMethod",
        "Publish",
        "Publish",
        "Acks",
        "ChannelClosed",
        "ConnectionClosed",
    ]
