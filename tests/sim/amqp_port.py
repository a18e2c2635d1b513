"""`AmqpPort`: the node end of one simulated client connection, a port adapter.

Bytes in, events to the node: the bytes a `ClientLink` carries go into the
shipped pure `AmqpConnection` (api/amqp/connection_machine.py), which does
all of the protocol (header, SASL, tuning, channels, frame limits, content
assembly, heartbeats, closing); this adapter only does what the real shell
(`api.amqp.connection_handler`) and the broker do around it, cut to what the
simulation's clients use. It is not a copy of shipped code and does not
re-implement `ChannelSession`:

- `OpenRequested` -> `accept_open` (the vhost and the login are not what is
  under test: guest/guest is the only user);
- confirm.select -> select-ok; the channel counts delivery tags from 1;
  any other channel method -> the channel is closed 540 NOT_IMPLEMENTED;
- `Publish` -> the node's publish entry, `QueueNode.client_publish` (the
  same the direct clients use), under a publish number the simulation routes
  the node's confirm back by; the confirm comes back here as `confirmed`,
  answered with basic.ack / basic.nack of that delivery tag, one at a time
  (the shipped pipeline answers in publish order, several with `multiple`;
  acks out of order are AMQP too, and the client takes both);
- time: the machine's `tick(now_ms)` once `next_deadline_ms()` is passed
  (heartbeats out, a silent client counted gone after two intervals); a
  simulation tick is `MS_PER_TICK` to the machine;
- the machine closed (after `ConnectionClosed`) -> the port ends the link behind
  the last bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pamqp import commands

from api.amqp.channel_table import frame_ids
from api.amqp.connection_machine import AmqpConnection
from api.amqp.events import (
    ChannelClosed,
    ChannelMethod,
    ConnectionFailed,
    Event,
    OpenRequested,
    Publish,
)
from api.amqp.server_properties import ConnectionConfig
from logbroker.metadata.reply_codes import ReplyCode
from tests.sim.client_link import ClientLink

USER = "guest"
MS_PER_TICK = 250  # the machine counts heartbeats in whole seconds: a tick is 250 ms to it


class PublishEntry(Protocol):
    """What a node offers a client's publish (`QueueNode.client_publish`)."""

    @property
    def alive(self) -> bool: ...

    def client_publish(self, queue: str, publish: int, payload: bytes) -> None: ...


# (queue, port, channel, delivery tag) -> the publish number the node's confirm will name
Register = Callable[[str, "AmqpPort", int, int], int]


def _authenticate(user: str, password: str | None) -> str | None:
    return user if (user, password) == (USER, USER) else None


class AmqpPort:
    """One client connection on one node (see the module docstring)."""

    def __init__(self, node: PublishEntry, link: ClientLink, config: ConnectionConfig,
                 now: int, register: Register) -> None:
        self.node = node
        self.link = link
        self.machine = AmqpConnection(config, _authenticate, now * MS_PER_TICK)
        self._register = register
        self._next_tag: dict[int, int] = {}  # channels in confirm mode -> their next tag
        self.failures: list[ConnectionFailed] = []
        self.ended = False

    def receive(self, data: bytes, now: int) -> None:
        self.machine.receive_data(data, now * MS_PER_TICK)
        self._react(now)

    def tick(self, now: int) -> None:
        deadline = self.machine.next_deadline_ms()
        if deadline is not None and now * MS_PER_TICK >= deadline:
            self.machine.tick(now * MS_PER_TICK)
            self._react(now)

    def client_gone(self) -> None:
        """The client closed its end (or reset it): the socket is closed, nothing answers."""
        self.ended = True

    def confirmed(self, channel: int, tag: int, ok: bool, now: int) -> None:
        """The node confirmed (or refused) the publish sent with delivery tag `tag`."""
        if self.ended or not tag:
            return
        answer = commands.Basic.Ack(tag) if ok else commands.Basic.Nack(tag, requeue=False)
        self.machine.send_method(channel, answer)
        self._flush(now)

    def _react(self, now: int) -> None:
        for event in self.machine.next_events():
            self._handle(event)
        self._flush(now)

    def _handle(self, event: Event) -> None:
        if isinstance(event, OpenRequested):
            self.machine.accept_open()
        elif isinstance(event, Publish):
            self._publish(event)
        elif isinstance(event, ChannelMethod):
            self._method(event)
        elif isinstance(event, ChannelClosed):
            self._next_tag.pop(event.channel, None)
        elif isinstance(event, ConnectionFailed):
            self.failures.append(event)

    def _method(self, event: ChannelMethod) -> None:
        method = event.method
        if isinstance(method, commands.Confirm.Select):
            self._next_tag.setdefault(event.channel, 1)
            if not method.nowait:
                self.machine.send_method(event.channel, commands.Confirm.SelectOk())
            return
        class_id, method_id = frame_ids(method)
        self.machine.close_channel(event.channel, ReplyCode.NOT_IMPLEMENTED,
                                   f"NOT_IMPLEMENTED - {method.name} in the simulation",
                                   class_id, method_id)

    def _publish(self, event: Publish) -> None:
        tag = self._next_tag.get(event.channel, 0)
        if tag:
            self._next_tag[event.channel] = tag + 1
        queue = event.method.routing_key
        publish = self._register(queue, self, event.channel, tag)
        self.node.client_publish(queue, publish, event.body)

    def _flush(self, now: int) -> None:
        self.link.send_to_client(self.machine.data_to_send(), now)
        if self.machine.closed and not self.ended:
            self.ended = True
            self.link.close_from_node(now)
