"""Channel 0: the protocol header and the connection-class methods.

:class:`Handshake` answers the client's protocol header, connection.start-ok,
tune-ok, open, close and update-secret as RabbitMQ does, answers close / close-ok
while our own connection.close waits, and keeps what the handshake negotiated:
client properties and capabilities, SASL mechanism, user, tuning, virtual host.

It writes replies to the connection's :class:`~api.amqp.frame_buffers.Outbox` and events
to its event list, raises :class:`~api.amqp.wire.ProtocolError` for bad input
(a method out of place, a malformed login, a bad tune-ok), and returns every
other decision to :class:`~api.amqp.connection_machine.AmqpConnection`, which
owns the state: the next :class:`ConnectionState`, or an :class:`Ending`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from pamqp import commands, common

from api.amqp.channel_table import frame_ids
from api.amqp.connection_state import ConnectionState
from api.amqp.events import Event, OpenRequested, SecretUpdated
from api.amqp.frame_buffers import Inbox, Outbox
from api.amqp.negotiation import (
    Tuning,
    as_bytes,
    bad_header_explanation,
    header_verdict,
    negotiate_tuning,
    parse_credentials,
    refused_login_explanation,
)
from api.amqp.reply_texts import reply_text
from api.amqp.server_properties import (
    FRAME_MIN_SIZE,
    LOCALES,
    ConnectionConfig,
    server_properties,
)
from api.amqp.wire import (
    FRAME_METHOD,
    PROTOCOL_HEADER,
    ProtocolError,
    RawFrame,
    decode_method,
    method_ids,
    method_name,
)
from logbroker.metadata.reply_codes import ReplyCode

__all__ = [
    "CONNECTION_CLASS_ID",
    "OPEN_IDS",
    "Authenticator",
    "EndKind",
    "Ending",
    "Handshake",
    "LoginUnavailable",
]

#: ``authenticate(username, password) -> user name, or None to refuse the login``
#: (password None: EXTERNAL, the listener's verified certificate vouches for the
#: user); raises :class:`LoginUnavailable` when it cannot tell yet.
Authenticator = Callable[[str, str | None], str | None]


class LoginUnavailable(Exception):
    """The broker cannot check a login now (a starting node without its users): the
    connection is closed with 320 CONNECTION_FORCED, which clients retry, never with
    403 ACCESS_REFUSED, which they take as final."""

CONNECTION_CLASS_ID = commands.Connection.frame_id
_CLOSE_IDS = (CONNECTION_CLASS_ID, commands.Connection.Close.frame_id)
_CLOSE_OK_IDS = (CONNECTION_CLASS_ID, commands.Connection.CloseOk.frame_id)
OPEN_IDS = (CONNECTION_CLASS_ID, commands.Connection.Open.frame_id)


class EndKind(enum.Enum):
    BY_CLIENT = "by_client"  # the client's connection.close; close-ok already sent
    CLOSE = "close"  # send connection.close, then wait for close-ok
    DROP = "drop"  # no connection.close: the shell drops the socket


@dataclass(frozen=True, slots=True)
class Ending:
    """The handshake ends the connection: how, with which reply code and text."""

    how: EndKind
    code: int
    text: str
    detail: str = ""


class Handshake:
    """What channel 0 negotiated for one connection, and the replies that negotiate it."""

    def __init__(
        self,
        config: ConnectionConfig,
        authenticate: Authenticator,
        out: Outbox,
        events: list[Event],
    ) -> None:
        self._config = config
        self._authenticate = authenticate
        self._out = out
        self._events = events
        self._proposed = Tuning(config.channel_max, config.frame_max, config.heartbeat_s)
        self.tuning = Tuning(0, FRAME_MIN_SIZE, 0)  # until tune-ok, as RabbitMQ
        self.user = ""  # once authenticated
        self.login_user = ""  # the name the client logged in with, even if refused
        self.vhost = ""
        self.mechanism = ""
        self.client_properties: common.FieldTable = {}
        self.client_capabilities: common.FieldTable = {}

    def protocol_header(self, inbox: Inbox) -> ConnectionState | Ending | None:
        """The client's first 8 bytes: None while incomplete; STARTING once they are
        consumed and connection.start is sent; for a bad header, ours and an Ending."""
        head = inbox.peek(8)
        verdict = header_verdict(head)
        if verdict is None:
            return None
        if not verdict:
            self._out.write(PROTOCOL_HEADER)
            return Ending(EndKind.DROP, 0, bad_header_explanation(head))
        inbox.skip(8)
        start = commands.Connection.Start(
            version_major=0,
            version_minor=9,
            server_properties=server_properties(self._config),
            mechanisms=self._config.mechanisms,
            locales=LOCALES,
        )
        self._out.method(0, start)
        return ConnectionState.STARTING

    def method_frame(self, state: ConnectionState, frame: RawFrame) -> ConnectionState | Ending:
        """A method frame on channel 0 in ``state``: the next state, or how the connection ends."""
        method = decode_method(frame.payload)
        ids = frame_ids(method)
        if ids[0] != CONNECTION_CLASS_ID:  # RabbitMQ: "unexpected method in connection state"
            raise ProtocolError(
                ReplyCode.CHANNEL_ERROR,
                f"unexpected method {method_name(method)} on channel 0 "
                f"in connection state {state.value}",
                *ids,
            )
        if isinstance(method, commands.Connection.Close):
            self._out.method(0, commands.Connection.CloseOk())
            code, text = int(method.reply_code or 0), str(method.reply_text or "")
            return Ending(EndKind.BY_CLIENT, code, text)
        if state is ConnectionState.STARTING and isinstance(method, commands.Connection.StartOk):
            return self._start_ok(method)
        if state is ConnectionState.TUNING and isinstance(method, commands.Connection.TuneOk):
            self.tuning = negotiate_tuning(self._proposed, method)
            return ConnectionState.OPENING
        if state is ConnectionState.OPENING and isinstance(method, commands.Connection.Open):
            self.vhost = str(method.virtual_host)
            self._events.append(OpenRequested(self.vhost, self.user))
            return ConnectionState.OPEN_PENDING
        if state is ConnectionState.OPEN and isinstance(method, commands.Connection.UpdateSecret):
            self._out.method(0, commands.Connection.UpdateSecretOk())
            secret = SecretUpdated(as_bytes(method.new_secret), str(method.reason or ""))
            self._events.append(secret)
            return state
        raise ProtocolError(
            ReplyCode.COMMAND_INVALID,
            f"unexpected method {method_name(method)} in connection state {state.value}",
            *ids,
        )

    def closing_frame(self, frame: RawFrame) -> bool:
        """A frame while our connection.close waits: True once the close handshake is over.

        Only close / close-ok count (spec, class connection); a crossing
        connection.close is answered with close-ok.
        """
        on_channel_0 = frame.frame_type == FRAME_METHOD and frame.channel == 0
        ids = method_ids(frame.payload) if on_channel_0 else None
        if ids == _CLOSE_IDS:
            self._out.method(0, commands.Connection.CloseOk())
        return ids in (_CLOSE_IDS, _CLOSE_OK_IDS)

    def _start_ok(self, method: commands.Connection.StartOk) -> ConnectionState | Ending:
        props = method.client_properties
        self.client_properties = props if isinstance(props, dict) else {}
        caps = self.client_properties.get("capabilities")
        self.client_capabilities = caps if isinstance(caps, dict) else {}
        self.mechanism = str(method.mechanism)
        credentials = parse_credentials(self.mechanism, as_bytes(method.response),
                                        self._config.mechanisms,
                                        self._config.certificate_user)
        self.login_user = credentials.username
        try:
            user = self._authenticate(credentials.username, credentials.password)
        except LoginUnavailable as unavailable:
            code = ReplyCode.CONNECTION_FORCED
            return Ending(EndKind.CLOSE, code, reply_text(code, str(unavailable)))
        if user is None:
            code = ReplyCode.ACCESS_REFUSED
            text = reply_text(code, refused_login_explanation(self.mechanism))
            detail = f"user '{credentials.username}' - invalid credentials"
            if self.client_capabilities.get("authentication_failure_close") is True:
                return Ending(EndKind.CLOSE, code, text, detail)
            return Ending(EndKind.DROP, code, text, detail)  # as RabbitMQ without the capability
        self.user = user
        proposed = self._proposed
        tune = commands.Connection.Tune(
            proposed.channel_max, proposed.frame_max, proposed.heartbeat_s
        )
        self._out.method(0, tune)
        return ConnectionState.TUNING
