"""Events the connection machine reports to the broker layer.

The machine queues events as it processes input (``receive_data``), time
(``tick``) and the broker's decisions (``accept_open``); ``next_events()``
drains them in order. Every event is an immutable value.

Lifecycle, as the broker sees it::

    OpenRequested -> (accept_open | refuse_open)
    ChannelOpened(n) -> ChannelMethod / Publish ... -> ChannelClosed(n)
    ... -> [ConnectionFailed] -> ConnectionClosed   (exactly once, always last)

``ConnectionFailed`` comes first when the machine itself ended the connection
(bad input, heartbeat or handshake timeout); ``ConnectionClosed`` follows when
the close handshake finished or the connection was abandoned. After
``ConnectionClosed`` the shell flushes ``data_to_send()`` and closes the socket.
"""

from __future__ import annotations

from dataclasses import dataclass

from pamqp import base, commands

__all__ = [
    "Acks",
    "ChannelClosed",
    "ChannelMethod",
    "ChannelOpened",
    "ConnectionClosed",
    "ConnectionFailed",
    "Event",
    "OpenRequested",
    "Publish",
    "SecretUpdated",
]


@dataclass(frozen=True, slots=True)
class OpenRequested:
    """The client authenticated as ``user`` and asked for ``virtual_host``.

    The broker answers with ``accept_open()`` or ``refuse_open(code, text)``;
    until then the machine reads no further frames.
    """

    virtual_host: str
    user: str


@dataclass(frozen=True, slots=True)
class ChannelOpened:
    """channel.open was accepted; channel.open-ok has been sent."""

    channel: int


@dataclass(frozen=True, slots=True)
class ChannelClosed:
    """The channel is gone for the broker: release its consumers, unacked messages, ...

    ``by_client``: the client sent channel.close (close-ok has been sent). Otherwise
    the machine closed it because of a channel error it found itself (e.g. 406 for
    an oversized message). Channels the broker closes with ``close_channel`` do not
    produce this event.
    """

    channel: int
    by_client: bool
    reply_code: int
    reply_text: str
    class_id: int = 0
    method_id: int = 0


@dataclass(frozen=True, slots=True)
class ChannelMethod:
    """A client method on an open channel, for the broker to act on and answer.

    ``method`` is the decoded pamqp command (``pamqp.commands.Queue.Declare``, ...).
    Never channel.open / close / flow (the machine answers those) and never
    basic.publish (see :class:`Publish`).
    """

    channel: int
    method: base.Frame


@dataclass(slots=True)
class Acks:
    """basic.ack frames that came in a row on one channel: (delivery tag, multiple) each.

    One event for the run, not a ``ChannelMethod`` per ack: a consumer that acks
    every message sends tens of them per socket read. The machine appends to
    ``acks`` while the event is the last one queued (before ``next_events``).
    """

    channel: int
    acks: list[tuple[int, bool]]


@dataclass(slots=True)  # one per message: not frozen, which would cost 3x to build
class Publish:
    """A complete basic.publish: method, content header properties and the whole body."""

    channel: int
    method: commands.Basic.Publish
    properties: commands.Basic.Properties
    body: bytes
    raw_properties: bytes = b""  # the properties as the client encoded them


@dataclass(frozen=True, slots=True)
class SecretUpdated:
    """connection.update-secret arrived; update-secret-ok has been sent."""

    new_secret: bytes
    reason: str


@dataclass(frozen=True, slots=True)
class ConnectionFailed:
    """The machine ended the connection itself.

    ``sent_close``: a connection.close carrying ``reply_code`` / ``reply_text`` was
    queued for the client. It is False for a bad protocol header (the machine
    answers with its own protocol header instead), a heartbeat or handshake
    timeout (RabbitMQ just drops the socket; ``reply_code`` is 0 then) and a
    failed login by a client without the ``authentication_failure_close``
    capability. ``detail`` says more for the log (never sent to the client).
    """

    reply_code: int
    reply_text: str
    sent_close: bool
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The connection is over: flush ``data_to_send()`` and close the socket.

    ``by_client``: the client sent connection.close (close-ok has been sent);
    ``reply_code`` / ``reply_text`` are the client's, or the server's own close
    reason otherwise.
    """

    by_client: bool
    reply_code: int
    reply_text: str


Event = (
    OpenRequested
    | ChannelOpened
    | ChannelClosed
    | ChannelMethod
    | Acks
    | Publish
    | SecretUpdated
    | ConnectionFailed
    | ConnectionClosed
)
