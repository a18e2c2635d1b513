"""AMQP 0-9-1 reply codes, with the names RabbitMQ prints and their scope: the one table.

The specification (amqp0-9-1.xml, the `constant` elements) classes each error
code as a soft error, which closes only the channel (311, 312, 313, 403-406),
or a hard error, which closes the whole connection (320, 402, 501-506, 530,
540, 541); 200 (reply-success) is neither, it is the code of a normal close.
RabbitMQ prints a reply text as `NAME - explanation`, where NAME is the
member's name below. The AMQP listener (`api.amqp.reply_texts`) and the HTTP
API (`api.http.http_errors`) read their codes from here.
"""

from __future__ import annotations

import enum
from typing import Final


class ReplyCode(enum.IntEnum):
    """Every reply code of AMQP 0-9-1, named as RabbitMQ names it."""

    REPLY_SUCCESS = 200
    CONTENT_TOO_LARGE = 311
    NO_ROUTE = 312  # RabbitMQ's name for the spec's basic.return "no route" reply
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


# The names the metadata layer and the broker use (`BrokerError(NOT_FOUND, ...)`).
REPLY_SUCCESS: Final = ReplyCode.REPLY_SUCCESS
CONTENT_TOO_LARGE: Final = ReplyCode.CONTENT_TOO_LARGE
NO_ROUTE: Final = ReplyCode.NO_ROUTE
NO_CONSUMERS: Final = ReplyCode.NO_CONSUMERS
CONNECTION_FORCED: Final = ReplyCode.CONNECTION_FORCED
INVALID_PATH: Final = ReplyCode.INVALID_PATH
ACCESS_REFUSED: Final = ReplyCode.ACCESS_REFUSED
NOT_FOUND: Final = ReplyCode.NOT_FOUND
RESOURCE_LOCKED: Final = ReplyCode.RESOURCE_LOCKED
PRECONDITION_FAILED: Final = ReplyCode.PRECONDITION_FAILED
FRAME_ERROR: Final = ReplyCode.FRAME_ERROR
SYNTAX_ERROR: Final = ReplyCode.SYNTAX_ERROR
COMMAND_INVALID: Final = ReplyCode.COMMAND_INVALID
CHANNEL_ERROR: Final = ReplyCode.CHANNEL_ERROR
UNEXPECTED_FRAME: Final = ReplyCode.UNEXPECTED_FRAME
RESOURCE_ERROR: Final = ReplyCode.RESOURCE_ERROR
NOT_ALLOWED: Final = ReplyCode.NOT_ALLOWED
NOT_IMPLEMENTED: Final = ReplyCode.NOT_IMPLEMENTED
INTERNAL_ERROR: Final = ReplyCode.INTERNAL_ERROR

_SOFT: Final = frozenset({CONTENT_TOO_LARGE, NO_ROUTE, NO_CONSUMERS, ACCESS_REFUSED,
                          NOT_FOUND, RESOURCE_LOCKED, PRECONDITION_FAILED})
_HARD: Final = frozenset(ReplyCode) - _SOFT - {REPLY_SUCCESS}
_VALUES: Final = frozenset(int(code) for code in ReplyCode)


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
    """RabbitMQ's spelling of the code's name (`"NOT_FOUND"`), or `"UNKNOWN"`."""
    try:
        return ReplyCode(code).name
    except ValueError:
        return "UNKNOWN"
