"""AMQP 0-9-1 reply codes, their names, and whether they are hard or soft.

The spec splits error codes in two:

* soft errors (channel exceptions) close only the channel they occurred on:
  311, 312, 313, 403, 404, 405, 406;
* hard errors (connection exceptions) close the whole connection:
  320, 402, 501-506, 530, 540, 541.

200 (reply-success) is neither: it is the code of a normal close.

Names are spelled as RabbitMQ spells them in reply texts (``NOT_FOUND``,
``PRECONDITION_FAILED``); RabbitMQ's texts always read ``"<NAME> - <explanation>"``
and :func:`reply_text` builds them that way, cut to the 255 bytes a shortstr holds.
"""

from __future__ import annotations

import enum

__all__ = [
    "MAX_REPLY_TEXT_BYTES",
    "ReplyCode",
    "is_channel_error",
    "is_connection_error",
    "is_valid_reply_code",
    "reply_name",
    "reply_text",
    "truncate_shortstr",
]

#: A reply-text is an AMQP shortstr: at most 255 bytes of UTF-8.
MAX_REPLY_TEXT_BYTES = 255


class ReplyCode(enum.IntEnum):
    """Every reply code of AMQP 0-9-1 (section 1.2 of the XML spec, ``constant``)."""

    REPLY_SUCCESS = 200
    CONTENT_TOO_LARGE = 311
    NO_ROUTE = 312
    NO_CONSUMERS = 313
    CONNECTION_FORCED = 320
    INVALID_PATH = 402
    ACCESS_REFUSED = 403
    NOT_FOUND = 404
    RESOURCE_LOCKED = 405
    PRECONDITION_FAILED = 406
    FRAME_ERROR = 501
    SYNTAX_ERROR = 502
    COMMAND_INVALID = 503
    CHANNEL_ERROR = 504
    UNEXPECTED_FRAME = 505
    RESOURCE_ERROR = 506
    NOT_ALLOWED = 530
    NOT_IMPLEMENTED = 540
    INTERNAL_ERROR = 541


_SOFT = frozenset(
    {
        ReplyCode.CONTENT_TOO_LARGE,
        ReplyCode.NO_ROUTE,
        ReplyCode.NO_CONSUMERS,
        ReplyCode.ACCESS_REFUSED,
        ReplyCode.NOT_FOUND,
        ReplyCode.RESOURCE_LOCKED,
        ReplyCode.PRECONDITION_FAILED,
    }
)

_HARD = frozenset(
    {
        ReplyCode.CONNECTION_FORCED,
        ReplyCode.INVALID_PATH,
        ReplyCode.FRAME_ERROR,
        ReplyCode.SYNTAX_ERROR,
        ReplyCode.COMMAND_INVALID,
        ReplyCode.CHANNEL_ERROR,
        ReplyCode.UNEXPECTED_FRAME,
        ReplyCode.RESOURCE_ERROR,
        ReplyCode.NOT_ALLOWED,
        ReplyCode.NOT_IMPLEMENTED,
        ReplyCode.INTERNAL_ERROR,
    }
)

_VALUES = frozenset(int(code) for code in ReplyCode)


def is_valid_reply_code(code: int) -> bool:
    """True for the codes the spec defines (200 and every error code)."""
    return code in _VALUES


def is_channel_error(code: int) -> bool:
    """True for soft errors: they close the channel, the connection stays."""
    return code in _SOFT


def is_connection_error(code: int) -> bool:
    """True for hard errors: they close the connection."""
    return code in _HARD


def reply_name(code: int) -> str:
    """RabbitMQ's spelling of the code's name (``"NOT_FOUND"``), or ``"UNKNOWN"``."""
    try:
        return ReplyCode(code).name
    except ValueError:
        return "UNKNOWN"


def truncate_shortstr(text: str) -> str:
    """Cut ``text`` to at most 255 UTF-8 bytes without splitting a character.

    Characters that cannot be encoded (lone surrogates) become ``?``.
    """
    raw = text.encode("utf-8", "replace")  # lone surrogates would not encode on the wire
    return raw[:MAX_REPLY_TEXT_BYTES].decode("utf-8", "ignore")


def reply_text(code: int, explanation: str) -> str:
    """``"<NAME> - <explanation>"`` as RabbitMQ writes it, fitted into a shortstr."""
    return truncate_shortstr(f"{reply_name(code)} - {explanation}")
