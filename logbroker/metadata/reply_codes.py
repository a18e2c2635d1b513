"""AMQP 0-9-1 reply codes, with the names RabbitMQ prints and their scope.

The specification (amqp0-9-1.xml, the `constant` elements) classes each error
code as a soft error, which closes only the channel, or a hard error, which
closes the whole connection. RabbitMQ prints a reply text as
`NAME - explanation`, where NAME is the upper-case name below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class ReplyCode:
    code: int
    name: str
    connection_error: bool
    """True for the spec's hard errors (connection.close), False for soft ones (channel.close)."""


REPLY_SUCCESS: Final = 200
CONTENT_TOO_LARGE: Final = 311
NO_ROUTE: Final = 312
NO_CONSUMERS: Final = 313
CONNECTION_FORCED: Final = 320
INVALID_PATH: Final = 402
ACCESS_REFUSED: Final = 403
NOT_FOUND: Final = 404
RESOURCE_LOCKED: Final = 405
PRECONDITION_FAILED: Final = 406
FRAME_ERROR: Final = 501
SYNTAX_ERROR: Final = 502
COMMAND_INVALID: Final = 503
CHANNEL_ERROR: Final = 504
UNEXPECTED_FRAME: Final = 505
RESOURCE_ERROR: Final = 506
NOT_ALLOWED: Final = 530
NOT_IMPLEMENTED: Final = 540
INTERNAL_ERROR: Final = 541

REPLY_CODES: Final[dict[int, ReplyCode]] = {
    entry.code: entry
    for entry in (
        ReplyCode(REPLY_SUCCESS, "REPLY_SUCCESS", False),
        ReplyCode(CONTENT_TOO_LARGE, "CONTENT_TOO_LARGE", False),
        # 312 is RabbitMQ's name for the spec's basic.return "no route" reply.
        ReplyCode(NO_ROUTE, "NO_ROUTE", False),
        ReplyCode(NO_CONSUMERS, "NO_CONSUMERS", False),
        ReplyCode(CONNECTION_FORCED, "CONNECTION_FORCED", True),
        ReplyCode(INVALID_PATH, "INVALID_PATH", True),
        ReplyCode(ACCESS_REFUSED, "ACCESS_REFUSED", False),
        ReplyCode(NOT_FOUND, "NOT_FOUND", False),
        ReplyCode(RESOURCE_LOCKED, "RESOURCE_LOCKED", False),
        ReplyCode(PRECONDITION_FAILED, "PRECONDITION_FAILED", False),
        ReplyCode(FRAME_ERROR, "FRAME_ERROR", True),
        ReplyCode(SYNTAX_ERROR, "SYNTAX_ERROR", True),
        ReplyCode(COMMAND_INVALID, "COMMAND_INVALID", True),
        ReplyCode(CHANNEL_ERROR, "CHANNEL_ERROR", True),
        ReplyCode(UNEXPECTED_FRAME, "UNEXPECTED_FRAME", True),
        ReplyCode(RESOURCE_ERROR, "RESOURCE_ERROR", True),
        ReplyCode(NOT_ALLOWED, "NOT_ALLOWED", True),
        ReplyCode(NOT_IMPLEMENTED, "NOT_IMPLEMENTED", True),
        ReplyCode(INTERNAL_ERROR, "INTERNAL_ERROR", True),
    )
}


def reply_code(code: int) -> ReplyCode:
    """The entry for `code`; KeyError for a number AMQP 0-9-1 does not define."""
    return REPLY_CODES[code]


def is_connection_error(code: int) -> bool:
    return REPLY_CODES[code].connection_error
