"""Pure pieces of the connection handshake: SASL responses and tune negotiation.

* PLAIN (RFC 4616) as RabbitMQ reads it: ``\\0user\\0password``; the authorization
  identity must be empty and the password may not hold a NUL.
* AMQPLAIN: a field table *without* its 4-byte length prefix (what py-amqp /
  kombu send) holding ``LOGIN`` and ``PASSWORD``.
* A malformed response is a 502 SYNTAX_ERROR; an unknown mechanism a 503
  COMMAND_INVALID ("unknown authentication mechanism"), as in RabbitMQ.

Protocol header: ``AMQP 0 0 9 1`` and the 0-9 header ``AMQP 1 1 0 9`` (which
RabbitMQ also accepts) start a connection; anything else is answered with our
header and the socket closes (spec section 4.2.2).

Tune negotiation follows RabbitMQ's ``validate_negotiated_integer_value``: the
client's tune-ok value must not be below the protocol minimum nor above what the
server proposed (530 NOT_ALLOWED "negotiated frame_max = N is higher than the
maximum allowed value (M)"). One deliberate leniency: a client value of 0
("no limit") takes the server's value instead of failing.
"""

from __future__ import annotations

from dataclasses import dataclass

from pamqp import commands

from api.amqp.server_properties import FRAME_MIN_SIZE
from api.amqp.wire import PROTOCOL_HEADER, ProtocolError, decode_table_body
from logbroker.metadata.reply_codes import ReplyCode

__all__ = [
    "ACCEPTED_PROTOCOL_HEADERS",
    "CHANNEL_NUMBER_MAX",
    "SUPPORTED_MECHANISMS",
    "Credentials",
    "Tuning",
    "as_bytes",
    "bad_header_explanation",
    "header_verdict",
    "negotiate_tuning",
    "parse_credentials",
    "refused_login_explanation",
]

SUPPORTED_MECHANISMS = ("PLAIN", "AMQPLAIN", "EXTERNAL")

ACCEPTED_PROTOCOL_HEADERS = (PROTOCOL_HEADER, b"AMQP\x01\x01\x00\x09")

#: Channel numbers are 16-bit; channel_max 0 ("no limit") means this.
CHANNEL_NUMBER_MAX = 65535

_START_OK_IDS = (commands.Connection.frame_id, commands.Connection.StartOk.frame_id)
_TUNE_OK_IDS = (commands.Connection.frame_id, commands.Connection.TuneOk.frame_id)


@dataclass(frozen=True, slots=True)
class Credentials:
    """User name and password from a start-ok response. EXTERNAL (RabbitMQ's
    rabbitmq_auth_mechanism_ssl) has no password: the listener's verified client
    certificate names the user, and `password` is None."""

    username: str
    password: str | None


@dataclass(frozen=True, slots=True)
class Tuning:
    """Negotiated connection parameters; 0 means "no limit" / "no heartbeat"."""

    channel_max: int
    frame_max: int
    heartbeat_s: int


def as_bytes(value: object) -> bytes:
    """pamqp decodes a longstr to str when it is valid UTF-8, else to bytes: undo that."""
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    return b""


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def parse_credentials(mechanism: str, response: bytes, offered: str = "PLAIN AMQPLAIN",
                      certificate_user: str | None = None) -> Credentials:
    """Credentials from a start-ok ``response`` or a :class:`ProtocolError`. EXTERNAL
    ignores the response, as RabbitMQ does: the user is the certificate's
    (``certificate_user``; "" when the client sent none, which no user is)."""
    if mechanism not in offered.split():
        mechanism = ""  # a mechanism this listener did not offer is unknown here
    if mechanism == "EXTERNAL":
        return Credentials(certificate_user or "", None)
    if mechanism == "PLAIN":
        return _parse_plain(response)
    if mechanism == "AMQPLAIN":
        return _parse_amqplain(response)
    raise ProtocolError(
        ReplyCode.COMMAND_INVALID,
        f"unknown authentication mechanism '{mechanism}'",
        *_START_OK_IDS,
    )


def _parse_plain(response: bytes) -> Credentials:
    if response[:1] == b"\x00":
        user, sep, password = response[1:].partition(b"\x00")
        if sep and b"\x00" not in password:
            return Credentials(_text(user), _text(password))
    raise ProtocolError(
        ReplyCode.SYNTAX_ERROR,
        "PLAIN response is not of the form \\0user\\0password",
        *_START_OK_IDS,
    )


def _parse_amqplain(response: bytes) -> Credentials:
    try:
        table = decode_table_body(response)
    except Exception as err:  # pamqp's table decoder raises many kinds on garbage
        raise ProtocolError(
            ReplyCode.SYNTAX_ERROR,
            f"AMQPLAIN response is not a field table: {type(err).__name__}",
            *_START_OK_IDS,
        ) from err
    login = table.get("LOGIN")
    password = table.get("PASSWORD")
    if not isinstance(login, str | bytes) or not isinstance(password, str | bytes):
        raise ProtocolError(
            ReplyCode.SYNTAX_ERROR,
            "AMQPLAIN auth info is missing LOGIN or PASSWORD field",
            *_START_OK_IDS,
        )
    return Credentials(_text(as_bytes(login)), _text(as_bytes(password)))


def _negotiate(field: str, proposed: int, client: int, minimum: int) -> int:
    if client == 0:
        return proposed
    if client < minimum:
        raise ProtocolError(
            ReplyCode.NOT_ALLOWED,
            f"negotiated {field} = {client} is lower than the minimum allowed value ({minimum})",
            *_TUNE_OK_IDS,
        )
    if proposed != 0 and client > proposed:
        raise ProtocolError(
            ReplyCode.NOT_ALLOWED,
            f"negotiated {field} = {client} is higher than the maximum allowed value ({proposed})",
            *_TUNE_OK_IDS,
        )
    return client


def negotiate_tuning(proposed: Tuning, tune_ok: commands.Connection.TuneOk) -> Tuning:
    """The parameters in force after tune-ok.

    channel_max / frame_max: the client's value, checked against our proposal;
    heartbeat: the client's value as is (0 disables heartbeats), as RabbitMQ does.
    """
    return Tuning(
        channel_max=_negotiate("channel_max", proposed.channel_max, int(tune_ok.channel_max), 1),
        frame_max=_negotiate(
            "frame_max", proposed.frame_max, int(tune_ok.frame_max), FRAME_MIN_SIZE
        ),
        heartbeat_s=int(tune_ok.heartbeat),
    )


def header_verdict(head: bytes) -> bool | None:
    """For the first (up to 8) bytes: True = accepted header, False = refuse, None = need more."""
    if head[:4] != b"AMQP"[: len(head)]:
        return False
    if len(head) < 8:
        return None
    return head[:8] in ACCEPTED_PROTOCOL_HEADERS


def bad_header_explanation(head: bytes) -> str:
    """Why a protocol header was refused, for the log (RabbitMQ's wording)."""
    if head.startswith((b"GET ", b"POST", b"PUT ", b"HEAD")):
        return "HTTP request detected on AMQP port"
    if head[:2] == b"\x16\x03":
        return "TLS client detected on non-TLS AMQP port"
    if head.startswith(b"AMQP"):
        return f"unsupported AMQP protocol header {head!r}; this server speaks AMQP 0-9-1"
    return f"client did not start with AMQP protocol header: {head!r}"


def refused_login_explanation(mechanism: str) -> str:
    """What RabbitMQ tells a client whose login failed (details go to the log only)."""
    return (
        f"Login was refused using authentication mechanism {mechanism}. "
        "For details see the broker logfile."
    )
