"""Protocol header, connection.start / start-ok / tune / tune-ok / open."""

from __future__ import annotations

import pytest
from pamqp import commands, header

from api.amqp import (
    AmqpConnection,
    ConnectionClosed,
    ConnectionConfig,
    ConnectionFailed,
    ConnectionState,
    OpenRequested,
    Tuning,
)
from api.amqp.handshake import LoginUnavailable
from api.amqp.server_properties import TLS_AUTH_MECHANISMS
from api.amqp.wire import PROTOCOL_HEADER
from tests.unit.api.amqp.client import Client, plain_response

REFUSED = (
    "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. "
    "For details see the broker logfile."
)


def test_connection_start_advertises_what_rabbitmq_advertises() -> None:
    start = Client().start()
    assert (start.version_major, start.version_minor) == (0, 9)
    assert start.mechanisms == "PLAIN AMQPLAIN"
    assert start.locales == "en_US"
    props = start.server_properties
    for key in ("product", "version", "platform", "cluster_name", "copyright", "information"):
        assert isinstance(props[key], str) and props[key]
    assert props["capabilities"] == {
        "publisher_confirms": True,
        "exchange_exchange_bindings": True,
        "basic.nack": True,
        "consumer_cancel_notify": True,
        "connection.blocked": True,
        "consumer_priorities": True,
        "authentication_failure_close": True,
        "per_consumer_qos": True,
        "direct_reply_to": True,
    }


@pytest.mark.parametrize("mechanism", ["PLAIN", "AMQPLAIN"])
def test_full_handshake(mechanism: str) -> None:
    client = Client()
    client.start()
    assert client.start_ok("alice", "s3cret", mechanism) == []
    assert client.sent() == [
        (0, "Connection.Tune", {"channel_max": 2047, "frame_max": 131072, "heartbeat": 60})
    ]
    assert client.machine.state is ConnectionState.TUNING
    assert client.machine.user == "alice"
    assert client.machine.auth_mechanism == mechanism
    assert client.machine.client_properties["product"] == "test-client"
    assert client.machine.client_capabilities["connection.blocked"] is True

    assert client.tune_ok(2047, 131072, 60) == []
    assert client.output() == []
    assert client.open("/prod") == [OpenRequested("/prod", "alice")]
    assert client.machine.reading_paused
    assert client.machine.accept_open()
    [(channel, open_ok)] = client.methods()
    assert channel == 0 and isinstance(open_ok, commands.Connection.OpenOk)
    assert client.machine.state is ConnectionState.OPEN
    assert client.machine.virtual_host == "/prod"
    assert client.machine.tuning == Tuning(2047, 131072, 60)


def test_amqp_0_9_header_is_accepted_like_rabbitmq() -> None:
    client = Client()
    assert client.feed(b"AMQP\x01\x01\x00\x09") == []
    [(_, start)] = client.output()
    assert isinstance(start, commands.Connection.Start)


def test_pipelined_handshake_in_one_chunk() -> None:
    client = Client()
    from tests.unit.api.amqp.client import marshal

    data = PROTOCOL_HEADER + b"".join(
        [
            marshal(0, commands.Connection.StartOk(mechanism="PLAIN", response="\0guest\0guest")),
            marshal(0, commands.Connection.TuneOk(100, 65536, 30)),
            marshal(0, commands.Connection.Open("/")),
            marshal(1, commands.Channel.Open()),
        ]
    )
    assert client.feed(data) == [OpenRequested("/", "guest")]
    # the channel.open waits until the broker accepts the vhost
    assert client.machine.accept_open()
    events = client.machine.next_events()
    assert [type(e).__name__ for e in events] == ["ChannelOpened"]
    kinds = [type(f).__name__ for _, f in client.methods()]
    assert kinds == ["Start", "Tune", "OpenOk", "OpenOk"]


@pytest.mark.parametrize(
    ("header_bytes", "explanation"),
    [
        (b"AMQP\x00\x00\x08\x00", "unsupported AMQP protocol header"),
        (b"AMQP\x00\x01\x00\x00", "unsupported AMQP protocol header"),
        (b"GET / HTTP/1.1\r\n", "HTTP request detected"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01", "TLS client detected"),
        (b"\x01\x00\x00\x00\x00\x00\x00\xce", "did not start with AMQP protocol header"),
    ],
)
def test_wrong_protocol_header_gets_ours_and_a_close(
    header_bytes: bytes, explanation: str
) -> None:
    client = Client()
    events = client.feed(header_bytes)
    assert client.machine.data_to_send() == PROTOCOL_HEADER
    assert client.machine.closed
    failed, closed = events
    assert isinstance(failed, ConnectionFailed) and not failed.sent_close
    assert explanation in failed.reply_text
    assert isinstance(closed, ConnectionClosed)
    assert client.feed(b"more bytes") == []
    assert client.machine.data_to_send() == b""


def test_wrong_header_is_refused_from_the_first_wrong_byte() -> None:
    client = Client()
    assert client.feed(b"AM") == []
    events = client.feed(b"X")
    assert isinstance(events[0], ConnectionFailed)
    assert parse_header(client.machine.data_to_send()) == (0, 9, 1)


def parse_header(data: bytes) -> tuple[int, int, int]:
    ph = header.ProtocolHeader()
    ph.unmarshal(data)
    return ph.major_version, ph.minor_version, ph.revision


def test_header_byte_by_byte() -> None:
    client = Client()
    for byte in PROTOCOL_HEADER[:-1]:
        assert client.feed(bytes([byte])) == []
        assert client.machine.data_to_send() == b""
    client.feed(PROTOCOL_HEADER[-1:])
    assert isinstance(client.output()[0][1], commands.Connection.Start)


def test_bad_credentials_close_403_when_client_has_the_capability() -> None:
    client = Client()
    client.start()
    events = client.start_ok("guest", "wrong")
    assert events == [
        ConnectionFailed(403, REFUSED, True, "user 'guest' - invalid credentials")
    ]
    [(channel, close)] = client.methods()
    assert channel == 0 and isinstance(close, commands.Connection.Close)
    assert (close.reply_code, close.reply_text) == (403, REFUSED)
    assert client.machine.state is ConnectionState.CLOSING
    assert client.send(0, commands.Connection.CloseOk()) == [
        ConnectionClosed(False, 403, REFUSED)
    ]
    assert client.machine.closed


def test_bad_credentials_without_the_capability_just_drop_like_rabbitmq() -> None:
    client = Client(capabilities={})
    client.start()
    failed, closed = client.start_ok("nobody", "x")
    assert isinstance(failed, ConnectionFailed)
    assert (failed.reply_code, failed.sent_close) == (403, False)
    assert isinstance(closed, ConnectionClosed)
    assert client.output() == []
    assert client.machine.closed


def test_a_login_the_broker_cannot_check_yet_is_320_not_403() -> None:
    """A starting node without its users says "try again", which clients retry."""

    def not_yet(username: str, password: str) -> str | None:
        raise LoginUnavailable("node n1 is starting")

    client = Client()
    client.machine = AmqpConnection(ConnectionConfig(), not_yet, 0)
    client.start()
    forced = "CONNECTION_FORCED - node n1 is starting"
    assert client.start_ok("guest", "guest") == [ConnectionFailed(320, forced, True, "")]
    [(channel, close)] = client.methods()
    assert channel == 0 and isinstance(close, commands.Connection.Close)
    assert (close.reply_code, close.reply_text) == (320, forced)
    assert client.machine.login_user == "guest" and client.machine.user == ""


def test_a_refused_login_keeps_the_name_it_tried_for_the_log() -> None:
    client = Client()
    client.start()
    assert client.machine.login_user == ""
    client.start_ok("nobody", "x")
    assert (client.machine.login_user, client.machine.user) == ("nobody", "")


def test_amqplain_bad_password() -> None:
    client = Client()
    client.start()
    [failed] = client.start_ok("alice", "nope", "AMQPLAIN")
    assert isinstance(failed, ConnectionFailed)
    assert failed.reply_text == REFUSED.replace("PLAIN", "AMQPLAIN")


@pytest.mark.parametrize(
    ("mechanism", "response", "code"),
    [
        ("PLAIN", "guest\0guest", 502),  # no leading NUL
        ("PLAIN", "authz\0guest\0guest", 502),  # authorization identity not supported
        ("PLAIN", "\0guest", 502),
        ("AMQPLAIN", "\x05LOGINS\x00\x00\x00\x05guest", 502),  # no PASSWORD
        ("AMQPLAIN", "\xff\xff", 502),
        ("EXTERNAL", "", 503),
    ],
)
def test_malformed_login(mechanism: str, response: str, code: int) -> None:
    client = Client()
    client.start()
    start_ok = commands.Connection.StartOk(mechanism=mechanism, response=response)
    [failed] = client.send(0, start_ok)
    assert isinstance(failed, ConnectionFailed) and failed.reply_code == code
    [(_, close)] = client.methods()
    assert isinstance(close, commands.Connection.Close)
    assert (close.reply_code, close.class_id, close.method_id) == (code, 10, 11)


def test_external_takes_the_certificate_user_where_offered() -> None:
    config = ConnectionConfig(mechanisms=TLS_AUTH_MECHANISMS, certificate_user="alice")
    client = Client(config)
    assert client.start().mechanisms == "PLAIN AMQPLAIN EXTERNAL"
    start_ok = commands.Connection.StartOk(mechanism="EXTERNAL", response="")
    assert client.send(0, start_ok) == []
    assert (client.machine.user, client.machine.auth_mechanism) == ("alice", "EXTERNAL")


@pytest.mark.parametrize("certificate_user", [None, "mallory"])
def test_external_without_a_known_certificate_user_is_refused(
        certificate_user: str | None) -> None:
    config = ConnectionConfig(mechanisms=TLS_AUTH_MECHANISMS, certificate_user=certificate_user)
    client = Client(config)
    client.start()
    failed = client.send(0, commands.Connection.StartOk(mechanism="EXTERNAL", response=""))[0]
    assert isinstance(failed, ConnectionFailed) and failed.reply_code == 403


@pytest.mark.parametrize(
    ("client_tune", "expected"),
    [
        ((2047, 131072, 60), Tuning(2047, 131072, 60)),
        ((0, 0, 0), Tuning(2047, 131072, 0)),  # 0 = "no limit": ours; no heartbeat
        ((10, 4096, 5), Tuning(10, 4096, 5)),
        ((2047, 131072, 600), Tuning(2047, 131072, 600)),  # heartbeat: the client's, as RabbitMQ
    ],
)
def test_tune_negotiation(client_tune: tuple[int, int, int], expected: Tuning) -> None:
    client = Client()
    client.start()
    client.start_ok()
    assert client.tune_ok(*client_tune) == []
    assert client.machine.tuning == expected


@pytest.mark.parametrize(
    ("client_tune", "text"),
    [
        ((2047, 131073, 60), "negotiated frame_max = 131073 is higher than the maximum allowed"),
        ((2047, 4095, 60), "negotiated frame_max = 4095 is lower than the minimum allowed"),
        ((2048, 131072, 60), "negotiated channel_max = 2048 is higher than the maximum allowed"),
    ],
)
def test_tune_ok_beyond_our_limits_is_530(client_tune: tuple[int, int, int], text: str) -> None:
    client = Client()
    client.start()
    client.start_ok()
    client.output()
    [failed] = client.tune_ok(*client_tune)
    assert isinstance(failed, ConnectionFailed) and failed.reply_code == 530
    assert failed.reply_text.startswith("NOT_ALLOWED - " + text)


def test_server_without_limits_takes_the_clients() -> None:
    client = Client(ConnectionConfig(channel_max=0, frame_max=0, heartbeat_s=0))
    client.start()
    client.start_ok()
    assert client.sent() == [
        (0, "Connection.Tune", {"channel_max": 0, "frame_max": 0, "heartbeat": 0})
    ]
    client.tune_ok(0, 0, 0)
    assert client.machine.tuning == Tuning(0, 0, 0)
    client.open()
    client.machine.accept_open()
    client.send(65535, commands.Channel.Open())
    assert 65535 in client.machine.open_channels


def test_frame_limit_before_tune_ok_is_4096_like_rabbitmq() -> None:
    client = Client()
    client.start()
    big = commands.Connection.StartOk(
        client_properties={"blob": "x" * 5000}, response=plain_response("guest", "guest")
    )
    [failed, closed] = client.send(0, big)
    assert isinstance(failed, ConnectionFailed) and failed.reply_code == 501
    assert isinstance(closed, ConnectionClosed)


@pytest.mark.parametrize(
    "method",
    [
        commands.Connection.TuneOk(0, 0, 0),
        commands.Connection.Open("/"),
        commands.Connection.CloseOk(),
        commands.Connection.SecureOk("x"),
    ],
)
def test_methods_in_the_wrong_state_are_503(method: commands.base.Frame) -> None:
    client = Client()
    client.start()
    [failed] = client.send(0, method)
    assert isinstance(failed, ConnectionFailed)
    assert failed.reply_code == 503
    assert "in connection state starting" in failed.reply_text


def test_channel_frames_before_open_are_505() -> None:
    client = Client()
    client.start()
    client.start_ok()
    client.tune_ok()
    [failed] = client.send(1, commands.Channel.Open())
    assert isinstance(failed, ConnectionFailed) and failed.reply_code == 505


def test_refuse_open() -> None:
    client = Client()
    client.start()
    client.start_ok()
    client.tune_ok()
    client.open("nowhere")
    client.output()
    assert client.machine.refuse_open(530, "NOT_ALLOWED - vhost nowhere not found")
    [(_, close)] = client.methods()
    assert isinstance(close, commands.Connection.Close)
    assert (close.reply_code, close.reply_text, close.class_id, close.method_id) == (
        530,
        "NOT_ALLOWED - vhost nowhere not found",
        10,
        40,
    )
    assert client.send(0, commands.Connection.CloseOk()) == [
        ConnectionClosed(False, 530, "NOT_ALLOWED - vhost nowhere not found")
    ]


def test_accept_open_in_the_wrong_state_is_a_programming_error() -> None:
    client = Client()
    with pytest.raises(RuntimeError):
        client.machine.accept_open()


def test_handshake_timeout() -> None:
    client = Client(ConnectionConfig(handshake_timeout_ms=10_000), now_ms=1_000)
    client.start()
    assert client.machine.next_deadline_ms() == 11_000
    client.machine.tick(10_999)
    assert client.machine.next_events() == []
    client.machine.tick(11_000)
    failed, closed = client.machine.next_events()
    assert isinstance(failed, ConnectionFailed)
    assert (failed.reply_code, failed.sent_close) == (0, False)
    assert "handshake timeout" in failed.reply_text
    assert isinstance(closed, ConnectionClosed)
    assert client.machine.next_deadline_ms() is None
