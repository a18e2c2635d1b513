"""A tiny AMQP client for driving the connection machine in tests.

Frames are produced with ``pamqp.frame.marshal`` (as a real client library
would) and the machine's output is parsed back with ``pamqp.frame.unmarshal``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

from pamqp import base, body, commands, encode, frame, header

from api.amqp import AmqpConnection, ConnectionConfig, Event, OpenRequested
from api.amqp.wire import PROTOCOL_HEADER

Frame = frame.FrameTypes
USERS = {"guest": "guest", "alice": "s3cret"}
CLIENT_CAPABILITIES: dict[str, Any] = {
    "authentication_failure_close": True,
    "connection.blocked": True,
    "consumer_cancel_notify": True,
    "basic.nack": True,
    "publisher_confirms": True,
}


def authenticate(username: str, password: str | None) -> str | None:
    """password None: EXTERNAL (a certificate vouches for the user, who must exist)."""
    if password is None:
        return username if username in USERS else None
    return username if USERS.get(username) == password else None


def marshal(channel: int, value: Frame) -> bytes:
    """One frame as a client library writes it."""
    if isinstance(value, body.ContentBody):
        payload = value.value
        return struct.pack(">BHI", 3, channel, len(payload)) + payload + b"\xce"
    return frame.marshal(value, channel)


def raw_frame(frame_type: int, channel: int, payload: bytes, end: bytes = b"\xce") -> bytes:
    return struct.pack(">BHI", frame_type, channel, len(payload)) + payload + end


def plain_response(user: str, password: str) -> str:
    return f"\0{user}\0{password}"


def amqplain_response(user: str, password: str) -> str:
    """A field table without its length prefix, as py-amqp sends it (ASCII here)."""
    return encode.field_table({"LOGIN": user, "PASSWORD": password})[4:].decode("utf-8")


def parse(data: bytes) -> list[tuple[int, Frame]]:
    """Split the machine's output into (channel, frame) pairs."""
    out: list[tuple[int, Frame]] = []
    while data:
        if data.startswith(b"AMQP"):
            out.append((0, header.ProtocolHeader(*data[5:8])))
            data = data[8:]
            continue
        consumed, channel, value = frame.unmarshal(data)
        out.append((channel, value))
        data = data[consumed:]
    return out


def publish_frames(
    channel: int,
    payload: bytes,
    *,
    frame_size: int | None = None,
    properties: commands.Basic.Properties | None = None,
    exchange: str = "",
    routing_key: str = "rk",
    declared_size: int | None = None,
) -> bytes:
    """basic.publish + content header + body frames of at most ``frame_size`` bytes."""
    size = len(payload) if declared_size is None else declared_size
    parts = [
        marshal(channel, commands.Basic.Publish(exchange=exchange, routing_key=routing_key)),
        marshal(channel, header.ContentHeader(0, size, properties or commands.Basic.Properties())),
    ]
    step = frame_size or max(len(payload), 1)
    for offset in range(0, len(payload), step):
        parts.append(marshal(channel, body.ContentBody(payload[offset : offset + step])))
    return b"".join(parts)


def fields(value: base.Frame) -> tuple[str, dict[str, Any]]:
    """A comparable view of a pamqp method (pamqp frames have no __eq__)."""
    return value.name, dict(iter(value))


class Client:
    """Drives one AmqpConnection; keeps every event and every frame it received."""

    def __init__(
        self,
        config: ConnectionConfig | None = None,
        *,
        now_ms: int = 0,
        capabilities: dict[str, Any] | None = None,
    ) -> None:
        self.now_ms = now_ms
        self.machine = AmqpConnection(config or ConnectionConfig(), authenticate, now_ms)
        self.capabilities = CLIENT_CAPABILITIES if capabilities is None else capabilities

    # -- sending ----------------------------------------------------------------------

    def feed(self, data: bytes) -> list[Event]:
        self.machine.receive_data(data, self.now_ms)
        return self.machine.next_events()

    def send(self, channel: int, *values: Frame) -> list[Event]:
        return self.feed(b"".join(marshal(channel, v) for v in values))

    def output(self) -> list[tuple[int, Frame]]:
        return parse(self.machine.data_to_send())

    def methods(self) -> list[tuple[int, base.Frame]]:
        """The method frames among the output (heartbeats, headers, bodies dropped)."""
        return [(ch, f) for ch, f in self.output() if isinstance(f, base.Frame)]

    def sent(self) -> list[tuple[int, str, dict[str, Any]]]:
        """The method frames among the output as comparable (channel, name, fields)."""
        return [(ch, *fields(f)) for ch, f in self.methods()]

    # -- handshake --------------------------------------------------------------------

    def start(self) -> commands.Connection.Start:
        assert self.feed(PROTOCOL_HEADER) == []
        [(channel, start)] = self.output()
        assert channel == 0 and isinstance(start, commands.Connection.Start)
        return start

    def start_ok(
        self, user: str = "guest", password: str = "guest", mechanism: str = "PLAIN"
    ) -> list[Event]:
        if mechanism == "AMQPLAIN":
            response = amqplain_response(user, password)
        else:
            response = plain_response(user, password)
        start_ok = commands.Connection.StartOk(
            client_properties={"product": "test-client", "capabilities": self.capabilities},
            mechanism=mechanism,
            response=response,
        )
        return self.send(0, start_ok)

    def tune_ok(
        self, channel_max: int = 2047, frame_max: int = 131072, heartbeat_s: int = 60
    ) -> list[Event]:
        return self.send(0, commands.Connection.TuneOk(channel_max, frame_max, heartbeat_s))

    def open(self, vhost: str = "/") -> list[Event]:
        return self.send(0, commands.Connection.Open(vhost))

    def handshake(self, *, mechanism: str = "PLAIN", **tune: int) -> Client:
        """Everything up to open-ok; output drained."""
        self.start()
        assert self.start_ok(mechanism=mechanism) == []
        assert self.tune_ok(**tune) == []
        assert self.open() == [OpenRequested("/", "guest")]
        assert self.machine.accept_open()
        self.machine.data_to_send()
        return self

    def open_channels(self, numbers: Iterable[int]) -> None:
        for number in numbers:
            self.send(number, commands.Channel.Open())
        self.machine.data_to_send()
