"""`AmqpPublisher`: a simulated client publishing with confirms in AMQP 0-9-1 bytes.

Theory of operation
-------------------
The client writes real frames with pamqp and parses what comes back with
pamqp's `frame.unmarshal`, as any client library does: the protocol header,
start-ok (PLAIN, guest/guest), tune-ok (the server's limits and heartbeat),
connection.open, channel.open on channel 1, confirm.select; then, when the
simulation says (`publish`), basic.publish + content header + body to the
default exchange with the queue's name as routing key. The n-th publish on the channel has
delivery tag n; basic.ack / basic.nack (with `multiple`, all tags up to it)
record the payloads confirmed or refused in the queue's `Ledger`, as the
direct `Publisher` records its confirms.

Heartbeats run on the tick clock at the interval tune-ok agreed: one goes out
after half an interval without output; the server counts as gone after two
intervals without input. A connection that ends (the node's end of stream or
reset, the server's connection.close, channel.close, a heartbeat timeout)
is dropped, as is one the client closes itself (connection.close, then the
close-ok; the acks that come before it still count): its unconfirmed
publishes stay maybe-published, and the client connects again, to another
node if one is up, a few ticks later.

Invariants: every payload is recorded in the ledger (`on_publish`) before its
first byte is written; a payload is confirmed or refused at most once (its
tag leaves `_unconfirmed` when answered, and all of them when the connection
ends); the client never writes on a connection it has dropped.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from enum import Enum
from typing import Protocol

from pamqp import base, body, commands, frame, header, heartbeat

from tests.sim.amqp_port import MS_PER_TICK, USER
from tests.sim.client_link import ClientLink
from tests.sim.queue_clients import Publisher

CHANNEL = 1
MIN_FRAME = 8  # a frame's header (7 bytes) and end, or a protocol header


class Phase(Enum):
    DOWN = "down"
    HANDSHAKE = "handshake"
    READY = "ready"  # confirm.select-ok came: publishing
    CLOSING = "closing"  # our connection.close went out: waiting for close-ok


class Connector(Protocol):
    """How the client reaches the cluster (`AmqpTraffic`)."""

    @property
    def now(self) -> int: ...

    @property
    def rng(self) -> random.Random: ...

    def connect(self, avoid: str | None) -> ClientLink | None: ...

    def count(self, kind: str) -> None: ...

    def log(self, text: str) -> None: ...


class AmqpPublisher:
    """One AMQP client publishing to `publisher.queue` (see the module docstring)."""

    def __init__(self, name: str, publisher: Publisher) -> None:
        self.name = name
        self.publisher = publisher
        self.link: ClientLink | None = None
        self.phase = Phase.DOWN
        self._buffer = bytearray()
        self._unconfirmed: dict[int, bytes] = {}  # delivery tag -> payload
        self._next_tag = 1
        self._heartbeat_ticks = 0
        self._last_sent = self._last_received = 0
        self._retry_at = 0
        self._last_node: str | None = None

    # ---------------------------------------------------------------- ticks

    @property
    def ready(self) -> bool:
        """Connected, its channel in confirm mode: it may publish."""
        return self.phase is Phase.READY

    def tick(self, world: Connector, close_rate: float = 0.0) -> None:
        """Reconnect when due, read what arrived, keep the heartbeats; sometimes (at
        `close_rate` a tick) close the connection, the way a client program ends."""
        if self.link is None:
            if world.now >= self._retry_at:
                self._connect(world)
            return
        data, ended = self.link.due_at_client(world.now)
        if data:
            self._last_received = world.now
            self._buffer += data
            self._read_frames(world)
        if self.link is not None and ended:
            reset = self.link.reset_at is not None
            self._drop(world, "connection reset" if reset else "end of stream from the node")
        if self.link is not None:
            self._keep_alive(world)
        if self.ready and close_rate and world.rng.random() < close_rate:
            self._close(world)

    def _connect(self, world: Connector) -> None:
        link = world.connect(self._last_node)
        if link is None:
            self._retry_at = world.now + 1
            return
        self.link, self._last_node, self.phase = link, link.node, Phase.HANDSHAKE
        self._buffer.clear()
        self._next_tag = 1
        self._last_sent = self._last_received = world.now
        self._heartbeat_ticks = 0
        world.count("amqp_connections")
        self._write(world, [frame.marshal(header.ProtocolHeader(), 0)])

    def _keep_alive(self, world: Connector) -> None:
        interval = self._heartbeat_ticks
        if not interval:
            return
        if world.now - self._last_received >= 2 * interval:
            world.count("amqp_heartbeat_timeouts")
            self._drop(world, "missed heartbeats from the node")
        elif world.now - self._last_sent >= interval // 2:
            self._write(world, [frame.marshal(heartbeat.Heartbeat(), 0)])

    def publish(self, world: Connector) -> None:
        assert self.phase is Phase.READY
        number = self.publisher.next_number()
        payload = self.publisher.ledger.payload(number)
        self.publisher.ledger.on_publish(payload)
        self._unconfirmed[self._next_tag] = payload
        self._next_tag += 1
        properties = commands.Basic.Properties(delivery_mode=2)
        self._write(world, [
            frame.marshal(commands.Basic.Publish(exchange="",
                                                 routing_key=self.publisher.queue), CHANNEL),
            frame.marshal(header.ContentHeader(0, len(payload), properties), CHANNEL),
            frame.marshal(body.ContentBody(payload), CHANNEL),
        ])

    # ------------------------------------------------------------- frames in

    def _read_frames(self, world: Connector) -> None:
        while self.link is not None and self._whole_frame():
            # A whole frame pamqp cannot read is the machine's fault: it raises here.
            used, _, value = frame.unmarshal(bytes(self._buffer))
            del self._buffer[:used]
            if isinstance(value, base.Frame):
                self._method(world, value)

    def _whole_frame(self) -> bool:
        """The buffer starts with a whole frame (or the server's protocol header)."""
        buffer = self._buffer
        if len(buffer) < MIN_FRAME:
            return False
        size = 0 if buffer.startswith(b"AMQP") else int.from_bytes(buffer[3:7], "big")
        return len(buffer) >= MIN_FRAME + size

    def _method(self, world: Connector, method: base.Frame) -> None:
        handler = self._HANDLERS.get(type(method))
        if handler is None:
            self._drop(world, f"unexpected {method.name}")
        else:
            handler(self, world, method)

    def _start(self, world: Connector, _: base.Frame) -> None:
        self._write(world, [frame.marshal(commands.Connection.StartOk(
            client_properties={"product": self.name,
                               "capabilities": {"publisher_confirms": True}},
            mechanism="PLAIN", response=f"\0{USER}\0{USER}"), 0)])

    def _tune(self, world: Connector, method: base.Frame) -> None:
        assert isinstance(method, commands.Connection.Tune)
        self._heartbeat_ticks = method.heartbeat * 1000 // MS_PER_TICK
        self._write(world, [
            frame.marshal(commands.Connection.TuneOk(method.channel_max, method.frame_max,
                                                     method.heartbeat), 0),
            frame.marshal(commands.Connection.Open(virtual_host="/"), 0),
        ])

    def _close(self, world: Connector) -> None:
        """connection.close; acks may still come before the close-ok."""
        self.phase = Phase.CLOSING
        world.count("amqp_client_closes")
        self._write(world, [frame.marshal(commands.Connection.Close(200, "Goodbye", 0, 0), 0)])

    def _close_ok(self, world: Connector, _: base.Frame) -> None:
        self._drop(world, "closed by the client")

    def _open_ok(self, world: Connector, _: base.Frame) -> None:
        self._write(world, [frame.marshal(commands.Channel.Open(), CHANNEL)])

    def _channel_open_ok(self, world: Connector, _: base.Frame) -> None:
        self._write(world, [frame.marshal(commands.Confirm.Select(), CHANNEL)])

    def _select_ok(self, world: Connector, _: base.Frame) -> None:
        self.phase = Phase.READY

    def _ack(self, world: Connector, method: base.Frame) -> None:
        assert isinstance(method, commands.Basic.Ack | commands.Basic.Nack)
        ok = isinstance(method, commands.Basic.Ack)
        tags = [tag for tag in self._unconfirmed
                if tag == method.delivery_tag or (method.multiple and tag < method.delivery_tag)]
        for tag in tags:
            self.publisher.ledger.on_confirm(self._unconfirmed.pop(tag), ok)
            world.count("amqp_confirmed" if ok else "amqp_nacked")

    def _closed_by_server(self, world: Connector, method: base.Frame) -> None:
        if isinstance(method, commands.Connection.Close):
            self._write(world, [frame.marshal(commands.Connection.CloseOk(), 0)])
        else:
            self._write(world, [frame.marshal(commands.Channel.CloseOk(), CHANNEL)])
        self._drop(world, f"the node sent {method.name}")

    _HANDLERS: dict[type[base.Frame], Callable[[AmqpPublisher, Connector, base.Frame], None]] = {
        commands.Connection.Start: _start,
        commands.Connection.Tune: _tune,
        commands.Connection.OpenOk: _open_ok,
        commands.Channel.OpenOk: _channel_open_ok,
        commands.Confirm.SelectOk: _select_ok,
        commands.Basic.Ack: _ack,
        commands.Basic.Nack: _ack,
        commands.Connection.Close: _closed_by_server,
        commands.Connection.CloseOk: _close_ok,
        commands.Channel.Close: _closed_by_server,
    }

    # ------------------------------------------------------------ frames out

    def _write(self, world: Connector, frames: list[bytes]) -> None:
        assert self.link is not None
        self.link.send_to_node(frames, world.now)
        self._last_sent = world.now

    def _drop(self, world: Connector, why: str) -> None:
        """The connection is over: what it did not confirm stays maybe-published."""
        link = self.link
        assert link is not None
        if self._buffer or link.node_mid_frame():
            world.count("amqp_cut_mid_frame")
        world.count("amqp_breaks")
        world.log(f"{self.name}: connection to {link.node} ends ({why}), "
                  f"{len(self._unconfirmed)} publishes unconfirmed")
        link.close_from_client(world.now)
        self.link, self.phase = None, Phase.DOWN
        self._unconfirmed.clear()
        self._buffer.clear()
        self._retry_at = world.now + world.rng.randint(1, 4)
